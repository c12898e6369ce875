package opencode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
	v1      *Client
	v2      *ClientV2
	options Options // the credentials in use (from Discover, or o.Client)
	toastOK bool    // a toast route exists (1.x)
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
	s := &Server{o: o, log: o.Log, options: o.Client}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.id.url = o.URL
	return s, nil
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

// Detect finds out (again) where the server is and which generation it
// runs, and builds the client for it. A wrong password is an error that
// matches ErrUnauthorized; a server that is not up matches ErrUnavailable
// (and ErrRefused when nothing listens).
func (s *Server) Detect(ctx context.Context) (Generation, string, error) {
	s.mu.Lock()
	url, opts := s.id.url, s.options
	s.mu.Unlock()
	if s.o.Discover != nil {
		u, pw, err := s.o.Discover(ctx)
		if err != nil {
			return GenUnknown, "", err
		}
		url, opts = u, s.o.Client
		opts.Password = pw
	}
	gen, version, pid, err := Detect(ctx, url, opts)
	if err != nil {
		return gen, version, err
	}
	id := identity{gen: gen, version: version, pid: pid, url: url}
	var v1 *Client
	var v2 *ClientV2
	switch gen {
	case V1:
		v1, err = New(url, opts)
	case V2:
		o2 := opts
		o2.Username = "" // 2.x always authenticates as "opencode"
		v2, err = NewV2(url, o2)
		if err == nil {
			v2.SetLog(s.log)
		}
	}
	if err != nil {
		return GenUnknown, "", err
	}
	s.mu.Lock()
	prev := s.id
	s.id, s.v1, s.v2, s.options, s.toastOK = id, v1, v2, opts, gen == V1
	s.mu.Unlock()
	if prev.gen != GenUnknown && (prev.gen != gen || prev.version != version || prev.url != url) {
		s.log.Info("found opencode", "url", Redact(url), "generation", gen.String(), "version", version)
	}
	return gen, version, nil
}

// api is what both generations' clients offer the engine.
type api interface {
	MCPStatus(ctx context.Context, dir string) (map[string]ServerStatus, error)
	Connect(ctx context.Context, dir, name string) error
	MCPConfig(ctx context.Context, dir string) (map[string]MCPEntry, error)
	Doc(ctx context.Context) ([]byte, error)
}

// current returns the client of the detected generation, detecting first
// when nothing was found yet.
func (s *Server) current(ctx context.Context) (api, error) {
	s.mu.Lock()
	v1, v2 := s.v1, s.v2
	s.mu.Unlock()
	switch {
	case v1 != nil:
		return v1, nil
	case v2 != nil:
		return v2, nil
	}
	if _, _, err := s.Detect(ctx); err != nil {
		return nil, err
	}
	return s.current(ctx)
}

// MCPStatus reads the MCP status of dir (which boots dir's instance and
// starts its MCP servers: call it only for directories in use).
func (s *Server) MCPStatus(ctx context.Context, dir string) (map[string]ServerStatus, error) {
	c, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	return c.MCPStatus(ctx, dir)
}

// Connect asks OpenCode to connect one MCP server in dir.
func (s *Server) Connect(ctx context.Context, dir, name string) error {
	c, err := s.current(ctx)
	if err != nil {
		return err
	}
	return c.Connect(ctx, dir, name)
}

// MCPConfig reads the MCP servers configured for dir.
func (s *Server) MCPConfig(ctx context.Context, dir string) (map[string]MCPEntry, error) {
	c, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	return c.MCPConfig(ctx, dir)
}

// Doc reads the server's own API description (1.x /doc, 2.x /openapi.json).
func (s *Server) Doc(ctx context.Context) ([]byte, error) {
	c, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	return c.Doc(ctx)
}

// ShowToast shows t in an attached TUI. OpenCode 2.0.x has no toast route:
// then it returns ErrNoToast without a request.
func (s *Server) ShowToast(ctx context.Context, t Toast) error {
	if _, err := s.current(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	v1, ok := s.v1, s.toastOK
	s.mu.Unlock()
	if !ok || v1 == nil {
		return ErrNoToast
	}
	return v1.ShowToast(ctx, t)
}

// Stream follows the server's event stream, whatever its generation, and
// hands every event to fn (see Client.Stream). After an attempt that
// reached nobody, the next one detects the server again first (it may have
// moved, or been replaced by another generation); Connected.Restarted says
// when the process behind the stream is a new one.
func (s *Server) Stream(ctx context.Context, opts StreamOptions, fn func(Event)) error {
	return stream(ctx, opts, func(ctx context.Context, redetect bool) (feed, identity, error) {
		s.mu.Lock()
		v1, v2, id := s.v1, s.v2, s.id
		s.mu.Unlock()
		if redetect || (v1 == nil && v2 == nil) {
			if _, _, err := s.Detect(ctx); err != nil {
				return feed{}, id, err
			}
			s.mu.Lock()
			v1, v2, id = s.v1, s.v2, s.id
			s.mu.Unlock()
		}
		switch {
		case v1 != nil:
			return v1.feed(), id, nil
		case v2 != nil:
			return v2.feed(), id, nil
		}
		return feed{}, id, fmt.Errorf("opencode at %s: no generation detected: %w", Redact(id.url), ErrUnavailable)
	}, fn)
}

// Capabilities reports, for an OpenCode 2 server, which route it offers
// for each thing the daemon uses, or why it has none (from its API
// description, read once per detection). A 1.x server has fixed routes:
// nil.
func (s *Server) Capabilities(ctx context.Context) []Capability {
	if _, err := s.current(ctx); err != nil {
		return nil
	}
	s.mu.Lock()
	v2 := s.v2
	s.mu.Unlock()
	if v2 == nil {
		return nil
	}
	return v2.Capabilities(ctx)
}

// LocationBooted reports whether dir's location is booted, without booting
// it, where the server can tell (OpenCode 2 with GET /api/debug/location);
// known is false where it cannot (1.x, 2.x without that route).
func (s *Server) LocationBooted(ctx context.Context, dir string) (booted, known bool, err error) {
	if _, err := s.current(ctx); err != nil {
		return false, false, err
	}
	s.mu.Lock()
	v2 := s.v2
	s.mu.Unlock()
	if v2 == nil {
		return false, false, nil
	}
	return v2.LocationBooted(ctx, dir)
}
