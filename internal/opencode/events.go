package opencode

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

// Event types the daemon acts on.
const (
	EventServerConnected  = "server.connected"
	EventHeartbeat        = "server.heartbeat"
	EventToolsChanged     = "mcp.tools.changed"
	EventInstanceDisposed = "server.instance.disposed"
	EventGlobalDisposed   = "global.disposed"
)

// Kind is what an event means to the engine, whatever OpenCode generation
// sent it. Nothing above this package looks at OpenCode's own event names.
type Kind int

// The kinds of event the engine acts on.
const (
	// KindOther is anything the engine ignores (project.*, file.*, …):
	// such events name directories nobody may be using.
	KindOther Kind = iota
	// KindServerFailed: a live MCP connection of Server in Directory
	// closed (1.x mcp.tools.changed). A crash report: re-check soon.
	KindServerFailed
	// KindServerChanged: Server in Directory changed state, for better or
	// worse (2.x mcp.status.changed). A wake-up, not a crash report.
	KindServerChanged
	// KindInstanceGone: OpenCode disposed or evicted Directory's instance.
	KindInstanceGone
	// KindAllGone: OpenCode disposed every instance.
	KindAllGone
	// KindActivity: a client is using Directory (sessions, messages), so
	// its MCP servers run anyway.
	KindActivity
)

// Event is one message of the event stream, reduced to what the daemon uses.
type Event struct {
	// Kind is what the event means to the engine.
	Kind Kind
	// Type is OpenCode's own name for the event (for logs and status).
	Type string
	// Directory the event is about; "" for none.
	Directory string
	// Server is the MCP server named (KindServerFailed, KindServerChanged).
	Server string
}

// ParseEvent decodes one data field of 1.x /global/event:
// {"directory": D, "payload": {"type": T, "properties": {...}}}.
//
// Most events are a streaming reply's message.part.updated, many a second
// and each carrying the whole text so far; only their type and directory
// matter. So nothing is decoded but those two and, for the events that need
// it, a field of properties: the rest is passed over without being built,
// and once OpenCode's field order (directory, then payload's type before
// its properties) has given what is needed, the rest is not even read.
// Keys are matched exactly (not ignoring case as encoding/json does for
// struct fields) and the first of duplicate keys counts.
func ParseEvent(data []byte) (Event, error) {
	s := jscan{b: data}
	if !s.open() {
		return Event{}, errors.New("event is not a JSON object")
	}
	var (
		dirRaw, props []byte
		hasDir        bool
		typ           string
		done          bool
	)
	for first := true; !done; {
		key, ok := s.member(&first)
		if !ok {
			break
		}
		switch string(key) {
		case "directory":
			if !hasDir {
				dirRaw, hasDir = s.skip(), true
			} else {
				s.skip()
			}
		case "payload":
			if s.peek() != '{' || typ != "" {
				s.skip()
				continue
			}
			s.open()
			for pfirst := true; ; {
				pkey, ok := s.member(&pfirst)
				if !ok {
					break
				}
				switch string(pkey) {
				case "type":
					t, isStr := jsonString(s.skip())
					if !isStr && !s.bad {
						return Event{}, errors.New("event payload.type is not a string")
					}
					if typ == "" {
						typ = t
					}
				case "properties":
					if props == nil {
						props = s.skip()
					} else {
						s.skip()
					}
				default:
					s.skip()
				}
				if typ != "" && hasDir && (props != nil || !needsProperties(typ)) {
					done = true
					break
				}
			}
		default:
			s.skip()
		}
	}
	if s.bad {
		return Event{}, errors.New("event is not a JSON object")
	}
	if typ == "" {
		return Event{}, errors.New("event has no payload.type")
	}
	ev := Event{Type: typ}
	// A non-string directory is ignored, not fatal.
	dir, _ := jsonString(dirRaw)
	switch {
	case typ == EventToolsChanged:
		ev.Kind, ev.Directory = KindServerFailed, dir
		ev.Server = stringProperty(props, "server")
	case typ == EventInstanceDisposed:
		ev.Kind, ev.Directory = KindInstanceGone, dir
		if pd := stringProperty(props, "directory"); pd != "" {
			ev.Directory = pd
		}
	case typ == EventGlobalDisposed:
		ev.Kind = KindAllGone
	case strings.HasPrefix(typ, "session.") || strings.HasPrefix(typ, "message."):
		ev.Kind, ev.Directory = KindActivity, dir
	default:
		ev.Directory = dir
	}
	if ev.Directory == "global" {
		ev.Directory = ""
	}
	return ev, nil
}

// needsProperties reports whether ParseEvent reads anything from an event
// type's properties.
func needsProperties(typ string) bool {
	return typ == EventToolsChanged || typ == EventInstanceDisposed
}

// stringProperty is the string member key of the properties object props,
// or "" when props is not an object or key is missing or not a string.
func stringProperty(props []byte, key string) string {
	s := jscan{b: props}
	if len(props) == 0 || !s.open() {
		return ""
	}
	for first := true; ; {
		k, ok := s.member(&first)
		if !ok {
			return ""
		}
		if string(k) == key {
			v, _ := jsonString(s.skip())
			return v
		}
		s.skip()
	}
}

// StreamOptions tune Stream.
type StreamOptions struct {
	// Silence is how long the stream may stay quiet before it is dropped
	// and re-subscribed: three heartbeat periods (default 30s; OpenCode
	// sends a heartbeat about every 10 s).
	Silence time.Duration
	// Backoff spaces reconnects (default 500ms doubling to 30s, jitter 0.2).
	Backoff backoff.Policy
	// Stable is how long a subscription must have delivered events for the
	// reconnect backoff to start again from its first step (default 30s):
	// from the subscribe to its last event, so a silent stream never counts.
	// A subscription that ends sooner continues the backoff, so a proxy
	// that drops the stream right after its first event gets re-subscribes
	// spaced by a growing delay, not two a second forever.
	Stable time.Duration
	// OnConnect runs after each successful subscribe.
	OnConnect func(Connected)
	// OnDrop runs when a subscription or an attempt at one ends, with the
	// reason.
	OnDrop func(err error)
	// Log receives debug lines; nil discards them.
	Log *slog.Logger
}

// Connected describes a successful subscribe.
type Connected struct {
	// N counts successful subscribes: 1 for the first.
	N int
	// Refused reports that since the previous subscription ended (since
	// Stream began, for the first) at least one attempt failed with
	// ErrRefused: nothing was listening, so OpenCode was not running, and
	// this may be a new process that knows nothing of the old one's
	// directories. Without it the gap was a hiccup of a running OpenCode
	// (a dropped connection, a 5xx, a timeout).
	Refused bool
}

// Stream subscribes to /global/event and hands every parsed event to fn,
// reconnecting with backoff when the stream drops, errors or stays silent
// past opts.Silence, until ctx ends. Unparsable events, and events over
// sse.MaxFrame, are skipped. fn is called from Stream's goroutine and must
// not block for long.
func (c *Client) Stream(ctx context.Context, opts StreamOptions, fn func(Event)) error {
	if opts.Silence <= 0 {
		opts.Silence = 30 * time.Second
	}
	if opts.Backoff.Initial <= 0 {
		opts.Backoff = backoff.Policy{Initial: 500 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.2}
	}
	if opts.Stable <= 0 {
		opts.Stable = 30 * time.Second
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	failures := 0
	connects := 0
	refused := false
	for {
		lasted, err := c.subscribe(ctx, opts.Silence, log, func() {
			connects++
			info := Connected{N: connects, Refused: refused}
			refused = false
			if opts.OnConnect != nil {
				opts.OnConnect(info)
			}
		}, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrRefused) {
			refused = true
		}
		if opts.OnDrop != nil {
			opts.OnDrop(err)
		}
		if lasted >= opts.Stable {
			failures = 0
		}
		failures++
		d := opts.Backoff.Jittered(opts.Backoff.Base(failures))
		log.Debug("event stream ended", "url", c.URL(), "err", err, "lasted", lasted, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errSilent ends a subscription that stayed quiet too long.
var errSilent = errors.New("event stream silent for three heartbeat periods")

// subscribe runs one subscription. lasted is the time from the subscribe
// to the last event it delivered (0 when the subscribe failed).
func (c *Client) subscribe(ctx context.Context, silence time.Duration, log *slog.Logger, connected func(), fn func(Event)) (lasted time.Duration, err error) {
	const op = "GET /global/event"
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	u := *c.base
	u.Path = c.base.Path + "/global/event"
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return 0, err
	}
	if c.password != "" {
		req.SetBasicAuth(c.username, c.password)
	}
	req.Header.Set("Accept", "text/event-stream")

	// The watchdog ends the request when nothing arrives for too long,
	// including a server that accepts the request and never answers.
	alive := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTimer(silence)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-alive:
				if !t.Stop() {
					select {
					case <-t.C:
					default:
					}
				}
				t.Reset(silence)
			case <-t.C:
				cancel(errSilent)
				return
			}
		}
	}()
	poke := func() {
		select {
		case alive <- struct{}{}:
		default:
		}
	}

	resp, err := c.long.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return 0, &Error{Op: op, URL: c.URL(), Detail: cause.Error(), kind: ErrUnavailable, cause: cause}
		}
		return 0, c.transportError(ctx, op, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return 0, &Error{Op: op, URL: c.URL(), Status: resp.StatusCode, kind: ErrUnauthorized}
	case resp.StatusCode != http.StatusOK:
		return 0, &Error{Op: op, URL: c.URL(), Status: resp.StatusCode, kind: ErrUnavailable}
	}
	poke()
	connected()
	start := time.Now()
	r := sse.NewReader(resp.Body)
	r.OnSkip = func(size int64) {
		// A skipped event is a sign of life all the same.
		poke()
		lasted = time.Since(start)
		log.Debug("event stream: skipped an event over the size limit", "url", c.URL(), "bytes", size, "limit", sse.MaxFrame)
	}
	for {
		frame, err := r.Next()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				err = cause
			}
			return lasted, &Error{Op: op, URL: c.URL(), Detail: "stream ended: " + err.Error(), kind: ErrUnavailable, cause: err}
		}
		poke()
		lasted = time.Since(start)
		ev, err := ParseEvent(frame.Data)
		if err != nil {
			continue
		}
		fn(ev)
	}
}
