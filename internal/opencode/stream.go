package opencode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

// StreamOptions tune Server.Stream.
type StreamOptions struct {
	// Silence is how long the stream may stay quiet before it is dropped
	// and re-subscribed. The default is three heartbeat periods of the
	// generation behind the stream: 30 s on 1.x (a heartbeat event about
	// every 10 s), 45 s on 2.x (a heartbeat comment every 15 s).
	Silence time.Duration
	// Handshake bounds the wait for the first event of a subscription
	// (default 5s): a request that reaches OpenCode within about half a
	// second of its port opening can hang for good (docs/opencode.md#the-first-half-second-after-the-port-opens), and a
	// healthy server sends server.connected at once.
	Handshake time.Duration
	// Backoff spaces reconnects (default 500ms doubling to 30s, jitter 0.2).
	Backoff backoff.Policy
	// OnConnect runs after each successful subscribe.
	OnConnect func(Connected)
	// OnDrop runs when a subscription or an attempt at one ends, with the
	// reason.
	OnDrop func(err error)
	// Log receives debug lines; nil discards them.
	Log *slog.Logger
}

func (o *StreamOptions) defaults() {
	if o.Handshake <= 0 {
		o.Handshake = 5 * time.Second
	}
	if o.Backoff.Initial <= 0 {
		o.Backoff = backoff.Policy{Initial: 500 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.2}
	}
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
}

// Connected describes a successful subscribe.
type Connected struct {
	// N counts successful subscribes: 1 for the first. Whether OpenCode
	// restarted in the gap before a later one is the Server's to tell
	// (OnChange: Gone, Replaced), before the subscribe that follows it.
	N int
	// Generation and Version are what the server reports, when known.
	Generation Generation
	Version    string
}

// feed is one generation's event stream: where it is, how its frames
// decode, and the client whose transport and credentials reach it.
type feed struct {
	client *Client
	path   string
	parse  func([]byte) (Event, error)
	// heartbeat is how often the server sends a heartbeat on this feed.
	heartbeat time.Duration
	// parseHead reads the head of an event too large to keep.
	parseHead func([]byte) (Event, error)
}

func (c *Client) feed() feed {
	return feed{client: c, path: "/global/event", parse: ParseEvent, parseHead: ParseEvent, heartbeat: 10 * time.Second}
}

// The 2.x feed's parser knows the sessions of the process behind it: its
// memory lasts across re-subscribes, each a detection of its own.
func (v *ClientV2) feed() feed {
	return feed{client: v.c, path: "/api/event", parse: v.sessions.parse, parseHead: ParseEventV2Head, heartbeat: 15 * time.Second}
}

// FirstEvent subscribes to the event stream once and returns the type of
// the first event it delivers (server.connected on a healthy server), or
// why none came within wait.
func (c *Client) FirstEvent(ctx context.Context, wait time.Duration) (string, error) {
	return firstEvent(ctx, c.feed(), wait)
}

// FirstEvent is Client.FirstEvent for OpenCode 2's GET /api/event.
func (v *ClientV2) FirstEvent(ctx context.Context, wait time.Duration) (string, error) {
	return firstEvent(ctx, v.feed(), wait)
}

func firstEvent(ctx context.Context, f feed, wait time.Duration) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := StreamOptions{Handshake: wait, Silence: wait}
	opts.defaults()
	typ := ""
	_, err := subscribe(ctx, f, opts, func() {}, func(ev Event) {
		if typ == "" {
			typ = ev.Type
			cancel()
		}
	})
	if typ != "" {
		return typ, nil
	}
	return "", err
}

// identity tells one OpenCode process from another, as far as it can be
// told: 1.x reports no pid.
type identity struct {
	gen     Generation
	version string
	pid     int
	url     string
}

// errSilent ends a subscription that stayed quiet too long.
var errSilent = errors.New("event stream silent for three heartbeat periods")

// errHandshake ends a subscription whose first event never came.
var errHandshake = errors.New("event stream sent no first event")

// subscribe runs one subscription. lasted is the time from the subscribe
// to the last event it delivered (0 when the subscribe failed).
func subscribe(ctx context.Context, f feed, opts StreamOptions, connected func(), fn func(Event)) (lasted time.Duration, err error) {
	c := f.client
	op := "GET " + f.path
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := c.request(ctx, "GET", f.path, "", "text/event-stream")
	if err != nil {
		return 0, err
	}

	// The watchdog ends the request when nothing arrives for too long:
	// the first event within Handshake (a server that accepts the request
	// and never answers), then any bytes (an event, a heartbeat comment)
	// within Silence.
	silence := opts.Silence
	if silence <= 0 {
		silence = 3 * f.heartbeat
	}
	alive := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTimer(opts.Handshake)
		defer t.Stop()
		why := errHandshake
		for {
			select {
			case <-done:
				return
			case <-alive:
				t.Reset(silence) // since Go 1.23 no stale tick survives a Reset
				why = errSilent
			case <-t.C:
				cancel(why)
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
		if d, ok := notYet(resp.StatusCode, resp.Header); ok {
			return 0, &Error{Op: op, URL: c.URL(), Status: resp.StatusCode, kind: ErrNotYet, RetryAfter: d}
		}
		return 0, &Error{Op: op, URL: c.URL(), Status: resp.StatusCode, kind: ErrUnavailable}
	case !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		// 2.x's web UI answers 200 HTML at 1.x's /global/event.
		return 0, &Error{Op: op, URL: c.URL(), Status: resp.StatusCode, Detail: fmt.Sprintf("answered %q, not an event stream", resp.Header.Get("Content-Type")), kind: ErrUnavailable}
	}
	start := time.Now()
	first := true
	r := sse.NewReader(&pokeReader{r: resp.Body, poke: func() {
		if !first {
			poke() // bytes after the first event: events and heartbeat comments
		}
	}})
	r.OnSkip = func(sk sse.Skipped) {
		lasted = time.Since(start)
		opts.Log.Debug("event stream: skipped an event over the size limit", "url", c.URL(), "bytes", sk.Size, "limit", sse.MaxFrame)
		// Its head still says where a client is busy (1.x puts the
		// directory and the type first): it arms and wakes, and is
		// otherwise skipped.
		if ev, err := f.parseHead(sk.Head); err == nil && wakes(ev.Kind) {
			fn(ev)
		}
	}
	for {
		frame, err := r.Next()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				err = cause
			}
			return lasted, &Error{Op: op, URL: c.URL(), Detail: "stream ended: " + err.Error(), kind: ErrUnavailable, cause: err}
		}
		if first {
			first = false
			poke()
			connected()
		}
		lasted = time.Since(start)
		ev, err := f.parse(frame.Data)
		if err != nil {
			continue
		}
		fn(ev)
	}
}

// wakes reports whether an event of kind k only arms or wakes a directory,
// so that its head alone may be acted on.
func wakes(k Kind) bool {
	return k == KindActivity || k == KindServerFailed || k == KindServerChanged
}

// pokeReader calls poke after every read that returned bytes.
type pokeReader struct {
	r    io.Reader
	poke func()
}

func (p *pokeReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.poke()
	}
	return n, err
}
