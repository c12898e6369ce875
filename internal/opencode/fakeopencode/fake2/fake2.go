// Package fake2 is an in-process stand-in for an OpenCode 2.x server, the
// 2.x sibling of fakeopencode, built from docs/opencode.md#opencode-2x:
// JSON routes under /api with basic auth always on, the location chosen by
// location[directory] or the x-opencode-directory header (?directory= is
// ignored, as 2.x does), MCP status as an array with "pending", connect
// answering 204, config as a bare array of layers, and one /api/event
// stream with the {id,created,type,location,data} envelope and heartbeat
// comments (one right after server.connected). Any location-scoped
// request boots the location: every server goes "pending", then to its
// configured status, each step announced by mcp.status.changed. Every
// request is recorded.
//
// It serves the /api routes of its profile's recorded API description
// (testdata) and answers others 404 with an empty body. Release212 (New, the default) is the released OpenCode 2.1.2 as
// measured: GET /api/info with its capabilities, connect under
// /api/experimental, GET and DELETE /api/debug/location, a 401 with an
// UnauthorizedError body, 404 LocationNotFoundError for a directory that
// does not exist, location.shutdown followed by the status changes of the
// servers a disposal stopped, and a first read of a booting location that
// lists no server yet. A test may vary it (NewProfile with a Profile of
// its own): no web UI, an empty 401, no location.shutdown, a missing
// directory answered 500.
//
// Its API mirrors fakeopencode's so tests can run over both generations.
// Serve it over an in-memory pipe (Serve) inside a testing/synctest bubble.
package fake2

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// This file holds the Server, its configuration and inspection, and its
// model of locations and their servers (boots, starts, crashes, shutdowns).
// The profiles are in profiles.go, the HTTP routes in routes.go, the event
// stream in events.go.

// Spec describes one configured MCP server, as for the 1.x fake. Status
// "disabled" is a server the config disables ("disabled": true); a
// ConnectDelay is how long a connect's attempt runs ("pending");
// ConnectNotFound makes connect answer 404 McpServerNotFoundError although
// status lists the server; CrashAfter makes a server a connect left
// connected crash that long after ("failed" "Connection closed", announced
// by mcp.status.changed), unless something changed it meanwhile.
type Spec = fakeopencode.Spec

// Defaults of a new Server.
const (
	// DefaultPassword is the password a new Server requires.
	DefaultPassword = "fake2-password"
	// DefaultHome is the server's working directory: the location of a
	// request that names none (the shared service runs in $HOME).
	DefaultHome = "/home/fake"
	// DefaultVersion is what /api/info reports.
	DefaultVersion = "2.1.2"
	// DefaultPID is what /api/info reports: above the largest pid_max
	// (2^22), so no process of the machine running the tests has it and
	// no process watch of the daemon under test can reach a real one.
	DefaultPID = 4194343
	// DefaultHeartbeat is the period of ": heartbeat" comments.
	DefaultHeartbeat = 15 * time.Second
	// URL is the base URL to use with the transport from Serve.
	URL = fakeopencode.URL
)

// Request is one recorded call.
type Request struct {
	Time   time.Time
	Method string
	// Route is one of the Route constants.
	Route string
	// Directory is the location the request selected ("" for routes
	// that take none): location[directory], else the decoded
	// x-opencode-directory header, else Home.
	Directory string
	// Name is the MCP server named in the path.
	Name string
	// LegacyDirectory is a ?directory= parameter, which 2.x ignores: a
	// client that sends it speaks 1.x and gets Home's servers.
	LegacyDirectory string
	// ViaHeader is true when the location came from x-opencode-directory.
	ViaHeader bool
	// RawQuery is the request's query string exactly as received.
	RawQuery string
}

// Server is the fake. Set its exported fields before Serve; its methods
// are safe for concurrent use.
type Server struct {
	// ReadGate holds GET /api/mcp's delay, override and concurrency count.
	fakeopencode.ReadGate
	// Password required as user "opencode" on /api/* and /openapi.json
	// (New sets DefaultPassword; "" turns auth off, as some builds allow).
	Password string
	// Home is the server's working directory (New sets DefaultHome).
	Home string
	// Version and PID are what /api/info reports.
	Version string
	PID     int

	profile Profile
	// served lists the routes the doc offers ("METHOD template"); nil
	// (a doc that is not a description) serves every route the fake
	// knows.
	served  map[string]bool
	missing map[string]bool // directories that do not exist (SetMissingDirectory)

	mu        sync.Mutex
	config    map[string]map[string]Spec // dir → name → spec; "" is every location's default
	loc       map[string]map[string]*state
	requests  []Request
	subs      map[*sub]struct{}
	mux       *http.ServeMux
	pending   time.Duration
	heartbeat time.Duration
	devRoute  bool
	seq       int
	service   string // "" ready, else ServiceStarting, …

	doc []byte

	// limited and cooldown are rate limits by remote endpoint URL
	// (RateLimit): until when the endpoint answers 429 and with what
	// Retry-After, and until when OpenCode's own cooldown answers for it.
	limited  map[string]rateLimit
	cooldown map[string]time.Time

	connecting, maxConnecting int
	configFailures            int
	notYetConnects            int           // connects still to answer "not yet" (NotYetConnects)
	notYetAfter               time.Duration // their Retry-After
	docFailures               int
	starts                    map[string]int // dir + "\x00" + name → connects that left it connected
}

type rateLimit struct {
	until      time.Time
	retryAfter time.Duration
}

type state struct {
	spec   Spec
	status string
	err    string
	// gen counts changes, so a delayed outcome does not overwrite a
	// later one (a connect, a shutdown).
	gen int
	// done is closed when the running start is over, settled or
	// superseded; nil when none runs.
	done chan struct{}
}

// bump records a change, ending any running start.
func (st *state) bump() {
	st.gen++
	if st.done != nil {
		close(st.done)
		st.done = nil
	}
}

// New returns a fake of OpenCode 2.1.2 (Release212) whose locations all
// have the given servers.
func New(servers map[string]Spec) *Server { return NewProfile(Release212, servers) }

// NewProfile returns a fake of profile p whose locations all have the
// given servers.
func NewProfile(p Profile, servers map[string]Spec) *Server {
	s := &Server{
		Password:  DefaultPassword,
		Home:      DefaultHome,
		Version:   p.Version,
		PID:       p.PID,
		profile:   p,
		missing:   map[string]bool{},
		config:    map[string]map[string]Spec{"": servers},
		loc:       map[string]map[string]*state{},
		subs:      map[*sub]struct{}{},
		heartbeat: DefaultHeartbeat,
		starts:    map[string]int{},
		limited:   map[string]rateLimit{},
		cooldown:  map[string]time.Time{},
	}
	s.mux = s.routes()
	s.setDocLocked([]byte(p.Doc))
	return s
}

// --- configuration and inspection, as in fakeopencode ---

// SetDirConfig gives one location its own servers (before it boots).
func (s *Server) SetDirConfig(dir string, servers map[string]Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config[dir] = servers
}

// SetPassword changes the password, as a service restarted with a new
// one (safe while serving, unlike setting the field).
func (s *Server) SetPassword(pw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Password = pw
}

// SetPID changes the pid /api/info reports, as a restarted service.
func (s *Server) SetPID(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.PID = pid
}

// SetPending makes every start (a boot, a connect without ConnectDelay)
// stay "pending" for d before its outcome. 0 (the default) settles a boot
// before the request that caused it is answered.
func (s *Server) SetPending(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = d
}

// SetDevConnectRoute serves connect only at /api/mcp/{name}/connect, as
// development builds did, when the doc is no description (SetDoc); the
// experimental route then answers a 404 without _tag, like any unknown
// /api route.
func (s *Server) SetDevConnectRoute(dev bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devRoute = dev
}

// SetDoc sets what GET /openapi.json answers (default: the profile's
// Doc). The routes served follow it (a document that is not one serves
// every route).
func (s *Server) SetDoc(doc []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDocLocked(doc)
}

func (s *Server) setDocLocked(doc []byte) {
	s.doc = doc
	s.served = docRoutes(doc)
}

// The service states of SetService (docs/opencode.md#not-yet-503-while-the-service-starts-or-stops).
const (
	ServiceStarting = "service_starting"
	ServiceStopping = "service_stopping"
	ServiceFailed   = "service_failed"
)

// SetService puts the service in a state that is not ready ("" is ready):
// then, as the preview build's packages/server/src/process.ts does, GET
// /api/health answers 503 (500 once failed) with an empty body and every
// other route under /api and /openapi.json 503 {"code": state}, all with
// retry-after: 1. Such a request is recorded as RouteNotReady.
func (s *Server) SetService(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.service = state
}

// NotYetConnects makes the next n connects answer what the service
// answers every route while it stops (SetService): 503
// {"code":"service_stopping"} with a Retry-After of retryAfter (whole
// seconds), as when it begins to stop between a status read and the
// connect it decided. They are recorded as RouteNotReady.
func (s *Server) NotYetConnects(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notYetConnects, s.notYetAfter = n, retryAfter
}

// SetMissingDirectory makes dir a directory that does not exist on the
// server's machine: a location-scoped request for it answers 404
// LocationNotFoundError and boots nothing (2.1.2), or 500 with an empty
// body, booting the location anyway (the preview, MissingAs500).
func (s *Server) SetMissingDirectory(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.missing[dir] = true
}

// Toasts is always empty: 2.x has no toast route (a POST to
// /tui/show-toast gets the web UI's 405).
func (s *Server) Toasts() []map[string]any { return nil }

// MaxConcurrentConnects is the most connects that were in flight at once.
func (s *Server) MaxConcurrentConnects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxConnecting
}

// SetStatus changes a server's state in a booted location, silently (as
// the 1.x fake's SetStatus; use Change to announce it as 2.x would).
func (s *Server) SetStatus(dir, name, status, errText string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.loc[dir][name]; st != nil {
		st.status, st.err = status, errText
		st.bump()
	}
}

// Change changes a server's state in a booted location and publishes
// mcp.status.changed, as 2.x does on every transition.
func (s *Server) Change(dir, name, status, errText string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.loc[dir][name]; st != nil {
		st.status, st.err = status, errText
		st.bump()
		s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
	}
}

// Crash marks a server failed with "Connection closed" and publishes
// mcp.status.changed, as 2.x does when a live connection drops.
func (s *Server) Crash(dir, name string) { s.Change(dir, name, "failed", "Connection closed") }

// SetAfterConnect changes what a connect does to a server in a booted
// location.
func (s *Server) SetAfterConnect(dir, name, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.loc[dir][name]; st != nil {
		st.spec.AfterConnect = status
	}
}

// RemoveServer drops a server from a booted location (config edited) and
// publishes mcp.status.changed.
func (s *Server) RemoveServer(dir, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.loc[dir][name]; ok {
		delete(s.loc[dir], name)
		s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
	}
}

// AddServer adds a server to a booted location and starts it.
func (s *Server) AddServer(dir, name string, sp Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loc[dir] == nil {
		return
	}
	st := &state{spec: sp}
	s.loc[dir][name] = st
	if sp.Status == "disabled" {
		st.status = "disabled"
		s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
		return
	}
	s.startLocked(dir, name, st, outcome(sp), sp.Error, s.pending, false)
}

// The errors OpenCode 2 reports for a remote server whose endpoint
// answered 429, and for one it did not ask because the endpoint's
// cooldown runs (core/src/mcp/client.ts and cooldown.ts).
const (
	ErrTooManyRequests = "Error POSTing to endpoint: Too Many Requests (HTTP 429)"
	ErrCooldown        = "Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429"
)

// RateLimit makes the remote endpoint url answer 429 with a Retry-After
// of retryAfter to every request for the next d. A connect of a remote
// server at url does what OpenCode 2 does then: it answers 204, and the
// server is failed with ErrTooManyRequests; OpenCode keeps a cooldown of
// retryAfter for the endpoint, shared by every location, within which a
// connect fails with ErrCooldown without asking the endpoint. Nothing a
// client sees tells the Retry-After. (Connects only: a location's boot
// starts its servers as before.)
func (s *Server) RateLimit(url string, d, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited[url] = rateLimit{until: time.Now().Add(d), retryAfter: retryAfter}
}

// rateLimitedLocked is the failure of a connect of a remote server at url
// that its endpoint's rate limit (or OpenCode's cooldown after one)
// refuses, and whether it does.
func (s *Server) rateLimitedLocked(url string) (errText string, limited bool) {
	now := time.Now()
	if now.Before(s.cooldown[url]) {
		return ErrCooldown, true
	}
	if l, ok := s.limited[url]; ok && now.Before(l.until) {
		s.cooldown[url] = now.Add(max(l.retryAfter, time.Second)) // 1 s without a Retry-After
		return ErrTooManyRequests, true
	}
	return "", false
}

// Shutdown evicts a location, as 2.x does after an hour without session
// activity, and publishes location.shutdown, then mcp.status.changed for
// each server it stopped. The next location-scoped request boots it
// again.
func (s *Server) Shutdown(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdownLocked(dir)
}

// Dispose is Shutdown, for tests written against the 1.x fake.
func (s *Server) Dispose(dir string) { s.Shutdown(dir) }

func (s *Server) shutdownLocked(dir string) {
	if _, ok := s.loc[dir]; !ok {
		return
	}
	var stopped []string
	for _, name := range sortedNames(s.loc[dir]) {
		st := s.loc[dir][name]
		if st.status != "disabled" {
			stopped = append(stopped, name)
		}
		st.bump()
	}
	delete(s.loc, dir)
	if !s.profile.NoShutdownEvent {
		s.emitLocked(dir, "location.shutdown", map[string]any{})
	}
	// Each server stopped is a status change too (2.1.2 sends them after
	// location.shutdown; the preview sends only them): a read now boots
	// the location again.
	for _, name := range stopped {
		s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
	}
}

// Instances lists the booted locations.
func (s *Server) Instances() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.instancesLocked()
}

func (s *Server) instancesLocked() []string {
	var out []string
	for d := range s.loc {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// Requests returns a copy of every recorded request.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count counts recorded requests for a route ("" any), location ("" any)
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

// --- the model ---

// outcome is where a start ends.
func outcome(sp Spec) string {
	if sp.Status == "" {
		return "connected"
	}
	return sp.Status
}

// Boot boots dir's location as a client's request would (a TUI started
// there, a prompt), without recording a request: every enabled server
// starts, as bootLocked says.
func (s *Server) Boot(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bootLocked(dir)
}

// bootLocked returns dir's location, booting it as 2.x does on any
// location-scoped request: every enabled server starts ("pending") and
// reaches its configured status after the pending time.
func (s *Server) bootLocked(dir string) map[string]*state {
	if l := s.loc[dir]; l != nil {
		return l
	}
	cfg, ok := s.config[dir]
	if !ok {
		cfg = s.config[""]
	}
	l := map[string]*state{}
	s.loc[dir] = l
	names := make([]string, 0, len(cfg))
	for name := range cfg {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sp := cfg[name]
		st := &state{spec: sp}
		l[name] = st
		if sp.Status == "disabled" {
			st.status = "disabled"
			continue
		}
		s.startLocked(dir, name, st, outcome(sp), sp.Error, s.pending, false)
	}
	return l
}

// startLocked puts st in "pending" and, after d, in status to (with errText
// for a failure), announcing both, unless st changed meanwhile. A start
// made by a connect that ends connected counts in Starts and arms the
// spec's CrashAfter. The channel it returns is closed when the start is
// over.
func (s *Server) startLocked(dir, name string, st *state, to, errText string, d time.Duration, byConnect bool) <-chan struct{} {
	st.bump()
	done := make(chan struct{})
	st.done = done
	st.status, st.err = "pending", ""
	s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
	settle := func(gen int) {
		if st.gen != gen {
			return
		}
		st.bump()
		st.status, st.err = to, ""
		if to == "failed" || to == "needs_client_registration" {
			st.err = errText
		}
		s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
		if byConnect && to == "connected" {
			s.starts[dir+"\x00"+name]++
			if c := st.spec.CrashAfter; c > 0 {
				s.crashLater(dir, name, st, c)
			}
		}
	}
	gen := st.gen
	if d <= 0 {
		settle(gen)
		return done
	}
	time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		settle(gen)
	})
	return done
}

// crashLater crashes st after d, unless it changed meanwhile (a connect
// restarted it, a shutdown stopped it). Caller holds mu.
func (s *Server) crashLater(dir, name string, st *state, d time.Duration) {
	gen := st.gen
	time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if st.gen != gen || s.loc[dir][name] != st {
			return
		}
		st.bump()
		st.status, st.err = "failed", "Connection closed"
		s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
	})
}

// Starts counts the connects that left a server connected in dir (for a
// local server: the processes OpenCode started).
func (s *Server) Starts(dir, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts[dir+"\x00"+name]
}

// FailConfig makes the next n GET /api/config answer 500, without booting
// the location.
func (s *Server) FailConfig(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configFailures = n
}

// FailDoc makes the next n GET /openapi.json answer 503 (a busy server),
// without a Retry-After.
func (s *Server) FailDoc(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docFailures = n
}

// Reload shuts every location down, as POST /api/location/reload does
// (each is announced as by Shutdown), without recording a request. The
// next request boots each again (2.1.2 itself boots them again at once).
func (s *Server) Reload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for dir := range s.loc {
		s.shutdownLocked(dir)
	}
}

func sortedNames(l map[string]*state) []string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Serve serves the fake on an in-memory pipe and returns the transport to
// reach it and a stop function that closes everything (call it before a
// synctest bubble ends).
func (s *Server) Serve() (*http.Transport, func()) { return fakeopencode.ServeHandler(s) }
