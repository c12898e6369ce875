// Package fakeopencode is an in-process stand-in for an OpenCode server, for
// unit tests and benchmarks of the daemon. It models the behaviour the
// daemon depends on (see docs/opencode.md#the-routes-the-daemon-calls-1x): per-directory
// instances created by any per-directory request, MCP status per server,
// connect that answers true whatever happens, 404 for an unknown name,
// basic auth, and the /global/event stream. Every request is recorded so
// tests can assert exactly which calls were made.
//
// Listen over an in-memory pipe (NewPipeListener) so tests can run inside a
// testing/synctest bubble with a fake clock.
package fakeopencode

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

// Spec describes one configured MCP server.
type Spec struct {
	// Status is the state the server starts in (default "connected").
	Status string
	// Error is reported with a failed status.
	Error string
	// Type is "local" (default) or "remote".
	Type string
	// URL of a remote server.
	URL string
	// Headers of a remote server; /config serves them, and they must never
	// leak into the daemon's output.
	Headers map[string]string
	// AfterConnect is the status a connect leaves (default: unchanged,
	// i.e. a server that stays broken). Use "connected" for one that comes
	// back.
	AfterConnect string
	// ConnectDelay is how long a connect takes.
	ConnectDelay time.Duration
	// ConnectNotFound makes connect answer 404 McpServerNotFoundError
	// although status lists the server (a config edited under it).
	ConnectNotFound bool
	// CrashAfter, when set, makes a server that a connect left connected
	// crash that long after (a crash loop): failed with "Connection
	// closed" and mcp.tools.changed published.
	CrashAfter time.Duration
}

// Request is one recorded call.
type Request struct {
	Time      time.Time
	Method    string
	Route     string // "/mcp", "/mcp/{name}/connect", "/config", "/global/event", "/global/health"
	Directory string
	Name      string
}

// Server is the fake. Configure it before use; its methods are safe for
// concurrent use.
type Server struct {
	// Username and Password enable basic auth when Password is set.
	Username, Password string
	// ReadGate holds GET /mcp's delay, override and concurrency count.
	ReadGate

	mu        sync.Mutex
	config    map[string]map[string]Spec // dir → name → spec; "" is every directory's default
	inst      map[string]map[string]*state
	requests  []Request
	subs      map[chan []byte]struct{}
	mux       *http.ServeMux
	heartbeat time.Duration
	doc       []byte
	toasts    []map[string]any

	connecting, maxConnecting int
	configFailures            int
	starts                    map[string]int // dir + "\x00" + name → connects that left it connected
}

type state struct {
	spec   Spec
	status string
	err    string
}

// New returns a fake whose directories all have the given servers.
func New(servers map[string]Spec) *Server {
	s := &Server{
		config: map[string]map[string]Spec{"": servers},
		inst:   map[string]map[string]*state{},
		subs:   map[chan []byte]struct{}{},
		starts: map[string]int{},
	}
	s.mux = s.routes()
	return s
}

// routes builds the fake's request router, once.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /global/health", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, "/global/health", "")
		writeJSON(w, 200, map[string]any{"healthy": true, "version": "1.18.34"})
	})
	mux.HandleFunc("GET /mcp", s.status)
	mux.HandleFunc("POST /mcp/{name}/connect", s.connect)
	mux.HandleFunc("GET /config", s.configRoute)
	mux.HandleFunc("GET /global/event", s.events)
	mux.HandleFunc("POST /tui/show-toast", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, "/tui/show-toast", "")
		var t map[string]any
		if err := json.NewDecoder(r.Body).Decode(&t); err != nil || t["message"] == nil || t["variant"] == nil {
			http.Error(w, "bad toast", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.toasts = append(s.toasts, t)
		s.mu.Unlock()
		writeJSON(w, 200, true)
	})
	mux.HandleFunc("GET /doc", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, "/doc", "")
		s.mu.Lock()
		doc := s.doc
		s.mu.Unlock()
		if doc == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})
	return mux
}

// SetDirConfig gives one directory its own servers.
func (s *Server) SetDirConfig(dir string, servers map[string]Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config[dir] = servers
}

// SetHeartbeat makes the event stream send server.heartbeat every d.
func (s *Server) SetHeartbeat(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heartbeat = d
}

// SetDoc sets what GET /doc answers (404 when unset).
func (s *Server) SetDoc(doc []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc = doc
}

// Toasts returns the bodies of every POST /tui/show-toast.
func (s *Server) Toasts() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.toasts...)
}

// MaxConcurrentConnects is the most connects that were in flight at once.
func (s *Server) MaxConcurrentConnects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxConnecting
}

// SetStatus changes a server's state in a live instance (a crash, a fix).
func (s *Server) SetStatus(dir, name, status, errText string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.inst[dir][name]; st != nil {
		st.status, st.err = status, errText
	}
}

// SetAfterConnect changes what a connect does to a server in a live instance.
func (s *Server) SetAfterConnect(dir, name, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.inst[dir][name]; st != nil {
		st.spec.AfterConnect = status
	}
}

// RemoveServer drops a server from a live instance (config edited).
func (s *Server) RemoveServer(dir, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inst[dir], name)
}

// AddServer adds a server to a live instance.
func (s *Server) AddServer(dir, name string, sp Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst[dir] != nil {
		s.inst[dir][name] = newState(sp)
	}
}

// Dispose drops a directory's instance, as POST /instance/dispose does.
func (s *Server) Dispose(dir string) {
	s.mu.Lock()
	delete(s.inst, dir)
	s.mu.Unlock()
	s.Publish(dir, "server.instance.disposed", map[string]any{"directory": dir})
}

// Instances lists directories that have an instance (were touched).
func (s *Server) Instances() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for d := range s.inst {
		out = append(out, d)
	}
	return out
}

// Requests returns a copy of every recorded request.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count counts recorded requests for a route ("" any), directory ("" any)
// and server name ("" any).
func (s *Server) Count(route, dir, name string) int {
	n := 0
	for _, r := range s.Requests() {
		if (route == "" || r.Route == route) && (dir == "" || r.Directory == dir) && (name == "" || r.Name == name) {
			n++
		}
	}
	return n
}

// ResetRequests forgets recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Publish sends an event on /global/event to every subscriber.
func (s *Server) Publish(dir, typ string, props map[string]any) {
	if props == nil {
		props = map[string]any{}
	}
	msg := map[string]any{"payload": map[string]any{"type": typ, "properties": props, "id": "evt"}}
	if dir != "" {
		msg["directory"] = dir
		msg["project"] = "p"
	}
	b, _ := json.Marshal(msg)
	s.PublishRaw(b)
}

// PublishRaw sends a raw data field (for garbage tests).
func (s *Server) PublishRaw(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- data:
		default: // a slow subscriber loses events, as over a real network
		}
	}
}

// Subscribers is the number of open /global/event streams.
func (s *Server) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Crash marks a server failed with "Connection closed" and publishes
// mcp.tools.changed, as OpenCode does when a live connection drops.
func (s *Server) Crash(dir, name string) {
	s.SetStatus(dir, name, "failed", "Connection closed")
	s.Publish(dir, "mcp.tools.changed", map[string]any{"server": name})
}

func newState(sp Spec) *state {
	st := &state{spec: sp, status: sp.Status, err: sp.Error}
	if st.status == "" {
		st.status = "connected"
	}
	return st
}

// instance returns dir's instance, creating it as OpenCode does on any
// per-directory request. Caller holds mu.
func (s *Server) instance(dir string) map[string]*state {
	if in := s.inst[dir]; in != nil {
		return in
	}
	cfg, ok := s.config[dir]
	if !ok {
		cfg = s.config[""]
	}
	in := map[string]*state{}
	for name, sp := range cfg {
		in[name] = newState(sp)
	}
	s.inst[dir] = in
	return in
}

func (s *Server) record(r *http.Request, route, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Time: time.Now(), Method: r.Method, Route: route, Directory: r.URL.Query().Get("directory"), Name: name})
}

// ServeHTTP implements the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.Password != "" {
		u, p, ok := r.BasicAuth()
		want := s.Username
		if want == "" {
			want = "opencode"
		}
		if !ok || u != want || p != s.Password {
			s.record(r, "401", "")
			// As 1.18.34 refuses (testdata/refusal-*.http): the Basic
			// challenge, which detection keys on, with an empty body, but
			// a tagged UnauthorizedError at /api/health.
			w.Header().Set("Vary", "Origin")
			w.Header().Set("Www-Authenticate", `Basic realm="Secure Area"`)
			if r.URL.Path == "/api/health" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"_tag":"UnauthorizedError","message":"Authentication required"}`)
				return
			}
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	s.record(r, "/mcp", "")
	dir := r.URL.Query().Get("directory")
	serve, leave := s.Enter(w, r, dir)
	defer leave()
	if !serve {
		return
	}
	s.mu.Lock()
	out := map[string]any{}
	for name, st := range s.instance(dir) {
		m := map[string]any{"status": st.status}
		if st.err != "" {
			m["error"] = st.err
		}
		out[name] = m
	}
	s.mu.Unlock()
	writeJSON(w, 200, out)
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.record(r, "/mcp/{name}/connect", name)
	dir := r.URL.Query().Get("directory")
	s.mu.Lock()
	st := s.instance(dir)[name]
	var delay time.Duration
	if st != nil {
		delay = st.spec.ConnectDelay
	}
	s.connecting++
	s.maxConnecting = max(s.maxConnecting, s.connecting)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.connecting--
		s.mu.Unlock()
	}()
	if st == nil || st.spec.ConnectNotFound {
		writeJSON(w, 404, map[string]any{"_tag": "McpServerNotFoundError", "name": name, "message": "MCP server not found: " + name})
		return
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	if st.spec.AfterConnect != "" {
		st.status = st.spec.AfterConnect
		if st.status != "failed" {
			st.err = ""
		}
	}
	if st.status == "connected" {
		s.starts[dir+"\x00"+name]++
		if d := st.spec.CrashAfter; d > 0 {
			time.AfterFunc(d, func() { s.Crash(dir, name) })
		}
	}
	s.mu.Unlock()
	writeJSON(w, 200, true)
}

// Starts counts the connects that left a server connected in dir (for a
// local server: the processes OpenCode started).
func (s *Server) Starts(dir, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts[dir+"\x00"+name]
}

// FailConfig makes the next n GET /config answer 500.
func (s *Server) FailConfig(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configFailures = n
}

func (s *Server) configRoute(w http.ResponseWriter, r *http.Request) {
	s.record(r, "/config", "")
	dir := r.URL.Query().Get("directory")
	s.mu.Lock()
	if s.configFailures > 0 {
		s.configFailures--
		s.mu.Unlock()
		http.Error(w, "config unavailable", http.StatusInternalServerError)
		return
	}
	mcp := map[string]any{}
	for name, st := range s.instance(dir) {
		e := map[string]any{"type": "local", "command": []string{"node", "server.js"}}
		if st.spec.Type == "remote" {
			e = map[string]any{"type": "remote", "url": st.spec.URL, "headers": st.spec.Headers}
		}
		mcp[name] = e
	}
	s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"mcp": mcp, "plugin": []string{}})
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	s.record(r, "/global/event", "")
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no flusher", 500)
		return
	}
	ch := make(chan []byte, 1024)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	hb := s.heartbeat
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	_ = sse.Write(w, "", []byte(`{"payload":{"id":"evt","type":"server.connected","properties":{}}}`))
	fl.Flush()
	var tick <-chan time.Time
	if hb > 0 {
		t := time.NewTicker(hb)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-ch:
			if sse.Write(w, "", b) != nil {
				return
			}
			fl.Flush()
		case <-tick:
			if sse.Write(w, "", []byte(`{"payload":{"id":"evt","type":"server.heartbeat","properties":{}}}`)) != nil {
				return
			}
			fl.Flush()
		}
	}
}

// PipeListener is an in-memory net.Listener: Dial hands the other end of a
// net.Pipe to Accept. Blocking on it is durable for testing/synctest.
type PipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewPipeListener returns an open listener.
func NewPipeListener() *PipeListener {
	return &PipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for a Dial.
func (l *PipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial.
func (l *PipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a placeholder address.
func (l *PipeListener) Addr() net.Addr { return pipeAddr{} }

// Dial connects to the listener.
func (l *PipeListener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, errors.New("pipe listener closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// Serve serves the fake on an in-memory pipe and returns the transport to
// reach it and a stop function that closes everything (call it before a
// synctest bubble ends).
func (s *Server) Serve() (*http.Transport, func()) { return ServeHandler(s) }

// ServeHandler serves h on an in-memory pipe, as Serve does.
func ServeHandler(h http.Handler) (*http.Transport, func()) {
	l := NewPipeListener()
	hs := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(l)
	}()
	tr := &http.Transport{DialContext: l.Dial, MaxIdleConnsPerHost: 64}
	return tr, func() {
		tr.CloseIdleConnections()
		_ = hs.Close()
		<-done
	}
}

// URL is the base URL to use with the transport from Serve.
const URL = "http://opencode.fake"
