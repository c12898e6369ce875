package opencode

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"sync"
	"time"
)

// ErrNoToast is returned by ShowToast when the server has no toast route
// (OpenCode 2.0.x).
var ErrNoToast = errors.New("this OpenCode has no toast route")

// Server is one OpenCode server of either generation. It finds out which
// by probing (Detect: 2.x's /api/info, then 1.x's /global/health) and looks
// again whenever its event stream comes back after the server could not be
// reached, so an upgrade from 1.x to 2.x under a running daemon is
// followed. It offers the engine's calls (MCPStatus, Connect, MCPConfig)
// and one event stream of generation-neutral events: nothing above this
// package knows which generation it talks to.
type Server struct {
	o   ServerOptions
	log *slog.Logger

	mu      sync.Mutex
	id      identity
	c       api     // the client of the last detection (nil before one)
	options Options // the credentials in use (from Discover, or o.Client)
	// down is set once a request was refused (nothing listened) and
	// cleared by the next answer: that answer comes from a new process.
	down bool
	// sessions are the directories of the sessions the OpenCode 2
	// process behind the server was seen with, shared by the clients of
	// its detections; emptied when it is replaced.
	sessions *sessionDirs
	// notYet paces the answers "not yet" (ErrNotYet) in a row: each
	// asks for at least its Retry-After and a backoff step, and
	// detection is not tried again before notYet.again (notYetErr).
	notYet    retry
	notYetErr *Error
	watchers  []func(Change, error)
	// changeMu orders the changes: each is decided and told to every
	// watcher before the next is decided, so two requests racing through
	// a restart cannot tell Replaced before the Gone it follows.
	// Watchers must not call the server back.
	changeMu sync.Mutex
}

// Change is news about the OpenCode process behind a Server, learned by
// whichever request saw it first (the event stream, a status read, a
// connect, a detection) and told to every watcher at once (OnChange).
type Change int

// The changes a Server reports.
const (
	// Gone: a request was refused (nothing listens): OpenCode is not
	// running, or is restarting. Its instances are gone with it, and
	// reading a directory of the next process would create one anew.
	Gone Change = iota + 1
	// Replaced: OpenCode answers again after it was Gone, or answers as
	// another process (2.x pid, version, generation or address).
	Replaced
)

func (c Change) String() string {
	switch c {
	case Gone:
		return "gone"
	case Replaced:
		return "replaced"
	}
	return "unknown"
}

// OnChange adds fn to the watchers of the server's process: it is called,
// without any lock of the server held, from the goroutine of the request
// that learned the change, before that request returns. Register before
// the first request.
func (s *Server) OnChange(fn func(Change, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, fn)
}

// observe learns from the outcome of one request: a refused connection
// makes the server Gone; any HTTP answer after that (even an error
// status: something listens again) makes it Replaced. It returns err,
// an ErrNotYet paced: its RetryAfter grows with each wait that ended in
// another "not yet" (1 s doubling to a minute), so a service that stays starting (or
// failed: 2.x answers service_failed with retry-after 1 too) is not asked
// every second for ever.
func (s *Server) observe(err error) error {
	var e *Error
	answered := err == nil || errors.As(err, &e) && e.Status != 0
	refused := errors.Is(err, ErrRefused)
	if !answered && !refused {
		return err // a timeout or a reset proves nothing either way
	}
	if refused {
		s.gone(err)
		return err
	}
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	s.mu.Lock()
	if _, ok := RetryAfter(err); ok {
		// One step per wait, however many requests heard "not yet"
		// meanwhile (every armed directory asks).
		paced := *e
		if now := time.Now(); now.Before(s.notYet.again) {
			paced.RetryAfter = max(s.notYet.again.Sub(now), e.RetryAfter)
		} else {
			paced.RetryAfter = s.notYet.fail(now, e.RetryAfter)
		}
		s.notYetErr, err = &paced, &paced
	} else {
		s.notYet = retry{}
	}
	s.set(false, false, err)
	return err
}

// gone makes the server Gone, once until it answers again. The pacing of
// "not yet" ends with it: whatever answers next is another process, whose
// first "not yet" waits one step, not the step the old one had reached.
func (s *Server) gone(err error) {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	s.mu.Lock()
	s.notYet, s.notYetErr = retry{}, nil
	s.set(true, false, err)
}

// set records whether the server is down, and tells the watchers the
// change: Gone when it goes down, Replaced when it answers again or
// another process answers (other; the sessions were that process's).
// Called with changeMu and mu held; it releases mu before telling.
func (s *Server) set(down, other bool, err error) {
	var ch Change
	switch {
	case down && !s.down:
		ch = Gone
	case !down && (s.down || other):
		ch = Replaced
		s.sessions.forget()
	}
	s.down = down
	watchers := s.watchers
	s.mu.Unlock()
	for _, fn := range watchers {
		if ch != 0 {
			fn(ch, err)
		}
	}
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// URL of the server (used until Discover finds another).
	URL string
	// Client holds the credentials, timeouts and transport.
	Client Options
	// Discover, when set, finds the server anew: its URL and password (the
	// OpenCode 2 background service's service.json). It is asked at the
	// first detection and whenever the server could not be reached, so a
	// service restarted on another port or with another password is
	// followed. The password is kept in memory only.
	Discover func(ctx context.Context) (url, password string, err error)
	// Log receives one line per generation change.
	Log *slog.Logger
}

// NewServer returns a server; nothing is sent until the first call.
func NewServer(o ServerOptions) (*Server, error) {
	if _, err := New(o.URL, o.Client); err != nil && o.Discover == nil {
		return nil, err
	}
	return &Server{o: o, log: cmp.Or(o.Log, slog.New(slog.DiscardHandler)), options: o.Client, sessions: newSessionDirs(maxSessions),
		id: identity{url: o.URL}}, nil
}

// URL is the server's current base URL, safe to log.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Redact(s.id.url)
}

// Generation reports the generation and version found by the last
// detection (GenUnknown before one succeeded).
func (s *Server) Generation() (Generation, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id.gen, s.id.version
}

// PID is the server's process id as the last detection found it (OpenCode
// 2 reports it; 0 for 1.x, or before a detection).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id.pid
}

// Detect finds out (again) where the server is and which generation it
// runs, and builds the client for it. A wrong password is an error that
// matches ErrUnauthorized; a server that is not up matches ErrUnavailable
// (and ErrRefused when nothing listens).
//
// While OpenCode answers "not yet" (ErrNotYet) it is not asked again
// before the wait that answer set: the error is returned at once.
func (s *Server) Detect(ctx context.Context) (Generation, string, error) {
	s.mu.Lock()
	url, opts := s.id.url, s.options
	if wait := time.Until(s.notYet.again); s.notYetErr != nil && wait > 0 {
		e := *s.notYetErr
		e.RetryAfter = wait
		s.mu.Unlock()
		return GenUnknown, "", &e
	}
	s.mu.Unlock()
	if s.o.Discover != nil {
		u, pw, err := s.o.Discover(ctx)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// The OpenCode 2 service removes its service.json when it
				// exits: gone, as surely as a refused connection.
				s.gone(err)
			}
			return GenUnknown, "", err
		}
		url, opts = u, s.o.Client
		opts.Password = pw
	}
	gen, version, pid, err := Detect(ctx, url, opts)
	if err != nil {
		return gen, version, s.observe(err)
	}
	id := identity{gen: gen, version: version, pid: pid, url: url}
	var c api
	if gen == V1 {
		c, err = New(url, opts)
	} else {
		o2 := opts
		o2.Username = "" // 2.x always authenticates as "opencode"
		c, err = newV2(url, o2, s.sessions, s.log)
	}
	if err != nil {
		return GenUnknown, "", err
	}
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	s.mu.Lock()
	prev := s.id
	s.id, s.c, s.options = id, c, opts
	s.notYet, s.notYetErr = retry{}, nil
	moved := prev.gen != GenUnknown && (prev.gen != gen || prev.version != version || prev.url != url)
	if moved {
		s.log.Info("found opencode", "url", Redact(url), "generation", gen.String(), "version", version)
	}
	// Another process answers where the last detection found one: its
	// instances are not the old one's, even if no request was refused in
	// between (a 2.x service replaced within one backoff step).
	s.set(false, moved || prev.pid != 0 && pid != 0 && prev.pid != pid, nil)
	return gen, version, nil
}

// api is what both generations' clients offer the engine.
type api interface {
	MCPStatus(ctx context.Context, dir string) (map[string]MCPServerStatus, error)
	Connect(ctx context.Context, dir, name string) error
	MCPConfig(ctx context.Context, dir string) (map[string]MCPEntry, error)
	feed() feed
}

// client is the client of the last detection (nil before one
// succeeded), and what it found.
func (s *Server) client() (api, identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c, s.id
}

// current returns the client of the detected generation, detecting first
// when nothing was found yet.
func (s *Server) current(ctx context.Context) (api, error) {
	if c, _ := s.client(); c != nil {
		return c, nil
	}
	if _, _, err := s.Detect(ctx); err != nil {
		return nil, err
	}
	return s.current(ctx)
}

// call runs f with the current client and learns from its outcome.
func call[T any](s *Server, ctx context.Context, f func(api) (T, error)) (T, error) {
	c, err := s.current(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := f(c)
	return v, s.observe(err)
}

// MCPStatus reads the MCP status of dir (which boots dir's instance and
// starts its MCP servers: call it only for directories in use).
func (s *Server) MCPStatus(ctx context.Context, dir string) (map[string]MCPServerStatus, error) {
	return call(s, ctx, func(c api) (map[string]MCPServerStatus, error) { return c.MCPStatus(ctx, dir) })
}

// Connect asks OpenCode to connect one MCP server in dir.
func (s *Server) Connect(ctx context.Context, dir, name string) error {
	_, err := call(s, ctx, func(c api) (struct{}, error) { return struct{}{}, c.Connect(ctx, dir, name) })
	return err
}

// MCPConfig reads the MCP servers configured for dir.
func (s *Server) MCPConfig(ctx context.Context, dir string) (map[string]MCPEntry, error) {
	return call(s, ctx, func(c api) (map[string]MCPEntry, error) { return c.MCPConfig(ctx, dir) })
}

// ShowToast shows t in an attached TUI. OpenCode 2.0.x has no toast route:
// then it returns ErrNoToast without a request.
func (s *Server) ShowToast(ctx context.Context, t Toast) error {
	_, err := call(s, ctx, func(c api) (struct{}, error) {
		if v1, ok := c.(*Client); ok { // only 1.x has a toast route
			return struct{}{}, v1.ShowToast(ctx, t)
		}
		return struct{}{}, ErrNoToast
	})
	return err
}

// Stream follows the server's event stream, whatever its generation (1.x's
// /global/event, 2.x's /api/event), and hands every parsed event to fn,
// reconnecting with backoff when the stream drops, errors or stays silent
// past opts.Silence, until ctx ends. Unparsable events, and events over
// sse.MaxFrame, are skipped. fn is called from Stream's goroutine and must
// not block for long. After an attempt that reached nobody, the next one
// detects the server again first (it may have moved, or been replaced by
// another generation). Whether the process behind the stream died or is
// a new one is told to the watchers (OnChange: Gone, Replaced), before
// the subscribe that follows it; the stream keeps no copy of it.
func (s *Server) Stream(ctx context.Context, opts StreamOptions, fn func(Event)) error {
	opts.defaults()
	failures, connects := 0, 0
	for attempt := 0; ; attempt++ {
		// Every re-subscribe looks at the server again (detects): it may
		// have moved, or a 2.x service that restarted within one backoff
		// step answers on the same port with another pid, and only its
		// identity tells a restart from a hiccup (Detect tells the
		// watchers).
		c, id := s.client()
		var err error
		if attempt > 0 || c == nil {
			if _, _, err = s.Detect(ctx); err == nil {
				c, id = s.client()
			}
		}
		lasted, wasUp := time.Duration(0), false
		if err == nil {
			lasted, err = subscribe(ctx, c.feed(), opts, func() {
				wasUp = true
				connects++
				if opts.OnConnect != nil {
					opts.OnConnect(Connected{N: connects, Generation: id.gen, Version: id.version})
				}
			}, fn)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = s.observe(err) // a refused subscribe: every watcher learns it now
		if opts.OnDrop != nil {
			opts.OnDrop(err)
		}
		// When a stream that was up ends, OpenCode may have died with it:
		// look at once, not a backoff step later, so that a refusal
		// reaches the watchers before any of them reads a directory of
		// the next process.
		if wasUp && !errors.Is(err, ErrRefused) {
			dctx, cancel := context.WithTimeout(ctx, DetectTimeout)
			_, _, _ = s.Detect(dctx)
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		// A subscription that delivered events for stableStream (from
		// the subscribe to its last event, so a silent one never counts)
		// starts the backoff again from its first step; one that ends
		// sooner continues it, so a proxy that drops the stream right
		// after its first event gets re-subscribes spaced by a growing
		// delay, not two a second forever.
		if lasted >= stableStream {
			failures = 0
		}
		failures++
		d := opts.Backoff.Jittered(opts.Backoff.Base(failures))
		if after, ok := RetryAfter(err); ok {
			d = max(d, after) // OpenCode said when it may be ready
		}
		opts.Log.Debug("event stream ended", "url", Redact(id.url), "err", err, "lasted", lasted, "retry_in", d)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// stableStream is how long a subscription must have delivered events for
// the reconnect backoff to start again from its first step.
const stableStream = 30 * time.Second

// Capabilities reports, for an OpenCode 2 server, the route of each thing
// the daemon uses, or why it has none for now. A 1.x server: nil.
func (s *Server) Capabilities(ctx context.Context) []Capability {
	c, _ := s.current(ctx)
	if v2, ok := c.(*ClientV2); ok {
		return v2.Capabilities()
	}
	return nil
}

// BootedLocations lists the directories whose locations are booted,
// without booting one, where the server can tell (OpenCode 2 with GET
// /api/debug/location); known is false where it cannot (1.x, 2.x without
// that route), and then no request is sent. The engine's LocationLister.
func (s *Server) BootedLocations(ctx context.Context) (dirs []string, known bool, err error) {
	c, err := s.current(ctx)
	v2, ok := c.(*ClientV2)
	if !ok {
		return nil, false, err
	}
	dirs, known, err = v2.BootedLocations(ctx)
	return dirs, known, s.observe(err)
}
