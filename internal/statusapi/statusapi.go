// Package statusapi is the daemon's own small HTTP API: GET /status (JSON),
// GET /metrics (Prometheus), GET /events (SSE of the daemon's events),
// POST /reconnect, and GET /healthz and GET /readyz for supervisors
// (health.go). The status and reconnect commands are its clients.
//
// Who may ask: every route answers only a Host that names this machine's
// loopback (a web page reaching it through DNS rebinding sends its own
// name), and a mutation also needs the daemon's bearer token, which only
// the daemon's user can read (see internal/registry). Arming a directory
// makes OpenCode run the commands that directory's config names.
package statusapi

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

// Source is one watched OpenCode server: the daemon's engine with its
// client, process view and service file.
type Source interface {
	// Summary is the server's status without its directories, which
	// Directories hands out one at a time: GET /status holds one of
	// them at a time, not a copy of all.
	Summary() reconnect.Snapshot
	Directories() iter.Seq[reconnect.DirSnapshot]
	Reconnect(dir string, names []string) (reconnect.ReconnectResult, error)
	// Arm arms dir for reason (reconnect.ArmedByFlag keeps it through
	// OpenCode's restarts, as a --directory given at the start does).
	Arm(dir, reason string) error
	// Alive answers within timeout whether the engine's loops still
	// turn; reconnect.ErrNotStarted before the engine runs,
	// reconnect.ErrStopped after (reconnect.Stuck decides).
	Alive(timeout time.Duration) error
	// CurrentURL and Stream name the server and tell its event stream's
	// state without the rest of Summary: they are asked at every probe
	// and every scrape of /metrics.
	CurrentURL() string
	Stream() reconnect.StreamState
	// Generation is what the last successful detection found ("1.x",
	// "2.x"); "" before one succeeded.
	Generation() string
	// Service is the OpenCode 2 service file the server was found
	// through, which it follows; nil while none answers, or when it
	// follows none.
	Service() *Service
	// ServiceFile is the OpenCode 2 service file the server was set to
	// follow (the daemon's registry entry names it), also while no
	// service answers; "" for a server found by URL.
	ServiceFile() string
}

// Service is the OpenCode 2 service a server was found through.
type Service struct {
	// File is the service file followed (service.json,
	// service-<channel>.json).
	File string `json:"file"`
	// PID and Version are what the file registers, checked against the
	// server.
	PID     int    `json:"pid,omitempty"`
	Version string `json:"version,omitempty"`
	// AlsoRegistered are other service files beside it whose service
	// answered too, not followed by this daemon.
	AlsoRegistered []string `json:"also_registered,omitempty"`
}

// OpenCodeStatus is one watched OpenCode server: what its engine sees and, for the
// OpenCode 2 service, which service file it was found through.
type OpenCodeStatus struct {
	reconnect.Snapshot
	Service *Service `json:"service,omitempty"`
}

// Status is the body of GET /status.
type Status struct {
	Version string    `json:"version"`
	Time    time.Time `json:"time"`
	Daemon  *Daemon   `json:"daemon,omitempty"`
	// Servers is nil only while writeStatus writes it (left out).
	Servers []OpenCodeStatus `json:"servers,omitzero"`
}

// ReconnectRequest is the body of POST /reconnect.
type ReconnectRequest struct {
	// Directory limits the reconnect to one directory (armed if needed);
	// empty means every armed directory.
	Directory string `json:"directory,omitempty"`
	// Servers limits it to these names; empty means every failed server.
	Servers []string `json:"servers,omitempty"`
	// URL names the OpenCode server when the daemon watches several;
	// empty means every one (refused with a Directory: arming a directory
	// in every server would start its MCP servers in each).
	URL string `json:"url,omitempty"`
	// Keep makes Directory the daemon's own, as if given with --directory
	// at its start: armed through OpenCode's restarts, not only until the
	// next one (run's --directory, handed to the daemon that watches the
	// OpenCode 2 service).
	Keep bool `json:"keep,omitempty"`
	// Service names the server by the OpenCode 2 service file it follows,
	// as the daemon's registry entry spells it, instead of by URL: the
	// service's URL is unknown while it does not run (run hands its
	// --directory over before its command starts the service).
	Service string `json:"service,omitempty"`
}

// ReconnectResponse is the answer of POST /reconnect.
type ReconnectResponse struct {
	Results []reconnect.ReconnectResult `json:"results"`
}

// API serves the API.
type API struct {
	Sources []Source
	Broker  *Broker
	Metrics *metrics.Set
	Version string
	Log     *slog.Logger
	// Token is the bearer token mutations need. Empty refuses every
	// mutation: the API fails closed.
	Token string
	// Public accepts any Host (--status-public): the API was put on the
	// network on purpose. Mutations still need Token.
	Public bool
	// BoundHost is the address the API listens on, accepted as Host
	// besides the loopback names; Serve sets it.
	BoundHost string
}

// Handler returns the API's routes.
func (s *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", s.status)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("POST /reconnect", s.authorized(s.reconnect))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	// The Go runtime's profiles (heap, allocs, goroutine, CPU), for
	// finding where the daemon's memory and time go: they show every
	// string it holds, so they need the token, as a mutation does.
	mux.HandleFunc("GET /debug/pprof/", s.authorized(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/profile", s.authorized(pprof.Profile))
	return s.hostCheck(sameOrigin(mux))
}

// hostCheck refuses, before any route runs, a request whose Host is not
// a loopback name or address (or the bound address). A web page that
// rebinds its own name to 127.0.0.1 reaches the port, but its browser
// still sends that name as Host (and as Origin, so the origin check alone
// cannot tell).
func (s *API) hostCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.Public && !s.loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("Host %.100q is not this machine's loopback; the status API answers only 127.0.0.1, [::1] or localhost (run the daemon with --status-public to serve other names)", r.Host), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *API) loopbackHost(hostport string) bool {
	if loopback.Host(hostport) {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	// An unparsable host (nil) equals no address.
	b := net.ParseIP(s.BoundHost)
	return b != nil && !b.IsUnspecified() && b.Equal(net.ParseIP(strings.Trim(host, "[]")))
}

// authorized lets a mutation (or a profile) through only with the daemon's token, compared
// in constant time. The token is never echoed.
func (s *API) authorized(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || s.Token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-reconnect"`)
			http.Error(w, r.Method+" "+r.URL.Path+" needs this daemon's token, which only its user can read, in the registry of running daemons ($XDG_STATE_HOME/mcp-reconnect/daemons; `mcp-reconnect reconnect` reads it from there)", http.StatusUnauthorized)
			return
		}
		next(w, r)
	}
}

// sameOrigin refuses requests a web page in a browser sends to another
// origin, so a page cannot drive POST /reconnect or read status.
func sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		site, o := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
		if site == "cross-site" || site == "same-site" || (o != "" && !strings.HasSuffix(o, "://"+r.Host)) {
			http.Error(w, "cross-origin requests are refused", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (s *API) status(w http.ResponseWriter, r *http.Request) {
	st := Status{Version: s.Version, Time: time.Now(), Daemon: self()}
	var servers []OpenCodeStatus
	var dirs []iter.Seq[reconnect.DirSnapshot]
	for _, src := range s.Sources {
		servers = append(servers, OpenCodeStatus{Snapshot: src.Summary(), Service: src.Service()})
		dirs = append(dirs, src.Directories())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	if err := writeStatus(bw, st, servers, dirs); err == nil {
		_ = bw.Flush()
	}
}

func (s *API) reconnect(w http.ResponseWriter, r *http.Request) {
	// Requiring JSON forces a CORS preflight on any browser page, which we
	// never answer.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		http.Error(w, "POST /reconnect takes Content-Type: application/json", http.StatusUnsupportedMediaType)
		return
	}
	var req ReconnectRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp := ReconnectResponse{Results: []reconnect.ReconnectResult{}}
	sources := s.Sources
	if req.URL != "" {
		sources = slices.DeleteFunc(slices.Clone(s.Sources), func(src Source) bool {
			return registry.NormalizeURL(src.CurrentURL()) != registry.NormalizeURL(req.URL)
		})
		if len(sources) == 0 {
			http.Error(w, "this daemon does not watch "+req.URL, http.StatusNotFound)
			return
		}
	}
	if req.Service != "" {
		sources = slices.DeleteFunc(slices.Clone(sources), func(src Source) bool {
			return src.ServiceFile() == "" || filepath.Clean(src.ServiceFile()) != filepath.Clean(req.Service)
		})
		if len(sources) == 0 {
			http.Error(w, "this daemon does not follow the OpenCode 2 service file "+req.Service, http.StatusNotFound)
			return
		}
	}
	if req.Keep && req.Directory == "" {
		http.Error(w, "keep needs a directory", http.StatusBadRequest)
		return
	}
	if req.URL == "" && req.Directory != "" && len(sources) > 1 {
		http.Error(w, "this daemon watches several OpenCode servers ("+join(sources, Source.CurrentURL)+"); name one with url (reconnect --url)", http.StatusBadRequest)
		return
	}
	for _, src := range sources {
		if req.Keep {
			if err := src.Arm(req.Directory, reconnect.ArmedByFlag); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		res, err := src.Reconnect(req.Directory, req.Servers)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp.Results = append(resp.Results, res)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *API) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, cancel := s.Broker.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": mcp-reconnect events\n\n")
	fl.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			b, _ := json.Marshal(ev)
			if sse.Write(w, ev.Type, b) != nil {
				return
			}
			fl.Flush()
		case <-keepAlive.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// Broker fans the engine's events out to /events subscribers. Publish
// never blocks: a subscriber that falls behind loses events.
type Broker struct {
	mu     sync.Mutex
	subs   map[chan reconnect.Event]struct{}
	closed bool
}

// NewBroker returns an empty broker.
func NewBroker() *Broker { return &Broker{subs: map[chan reconnect.Event]struct{}{}} }

// Publish sends ev to every subscriber.
func (b *Broker) Publish(ev reconnect.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// Subscribe returns a channel of events and a function to stop.
func (b *Broker) Subscribe() (<-chan reconnect.Event, func()) {
	ch := make(chan reconnect.Event, 256)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(ch)
		return ch, func() {}
	}
	b.subs[ch] = struct{}{}
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	}
}

// Close ends every subscription.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
}

// CheckAddr refuses a non-loopback listen address unless allowed: the API
// can trigger connects and shows directory names.
func CheckAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("status-addr %q: %w", addr, err)
	}
	if !allowRemote && !loopback.Host(host) {
		return fmt.Errorf("status-addr %q is not a loopback address; pass --status-public to serve it beyond this machine", addr)
	}
	return nil
}

// Serve listens on addr and serves until ctx ends. It returns once the
// listener is bound (ready) or failed; the server runs in a goroutine the
// returned wait function waits for.
func (s *API) Serve(ctx context.Context, addr string) (bound string, wait func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("status api: %w", err)
	}
	if h, _, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		s.BoundHost = h
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() {
		err := hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	}()
	stopped := make(chan struct{})
	context.AfterFunc(ctx, func() {
		defer close(stopped)
		s.Broker.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	})
	return ln.Addr().String(), func() error {
		<-stopped
		return <-errc
	}, nil
}
