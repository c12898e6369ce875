// Package fake2 is an in-process stand-in for an OpenCode 2.x server, the
// 2.x sibling of fakeopencode, built from docs/opencode.md#the-2x-surface-and-its-authentication:
// JSON routes under /api with basic auth always on, the location chosen by
// location[directory] or the x-opencode-directory header (?directory= is
// ignored, as 2.x does), MCP status as an array with "pending", connect
// answering 204, config as a bare array of layers, and one /api/event
// stream with the {id,created,type,location,data} envelope and heartbeat
// comments. Any location-scoped request boots the location: every server
// goes "pending", then to its configured status, each step announced by
// mcp.status.changed. Every request is recorded.
//
// It has two profiles. Release2021 (New) is 2.0.21 as docs/opencode.md describes
// it. Preview (NewPreview) is the v2 preview build measured in docs/opencode.md#the-v2-preview-build-measured
// section 6: it serves the /api routes its own API description lists
// (testdata/opencode-v2-preview-openapi.json, the real server's, served at
// /openapi.json) and answers others 404 with an empty body, so /api/health
// instead of /api/info, connect only at /api/mcp/{name}/connect, no
// /api/config, and GET and DELETE /api/debug/location; non-API paths 404
// empty (no web UI); 401 empty with only www-authenticate; a directory
// marked missing answers 500 empty and is booted anyway; no
// location.shutdown (a disposal announces itself by mcp.status.changed);
// session.execution.* without a location; a heartbeat comment right after
// server.connected.
//
// Its API mirrors fakeopencode's so tests can run over both generations.
// Serve it over an in-memory pipe (Serve) inside a testing/synctest bubble.
package fake2

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

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
	DefaultVersion = "2.0.21"
	// DefaultPID is what /api/info reports.
	DefaultPID = 43067
	// DefaultHeartbeat is the period of ": heartbeat" comments.
	DefaultHeartbeat = 15 * time.Second
	// URL is the base URL to use with the transport from Serve.
	URL = fakeopencode.URL
	// queue is how many frames a subscriber may lag before 2.x ends its
	// stream.
	queue = 4096
)

// Profile is the kind of OpenCode 2 server the fake imitates.
type Profile struct {
	// Name is "2.0.21" or "preview".
	Name string
	// Version and PID are what the version route reports.
	Version string
	PID     int
	// Doc is what GET /openapi.json answers.
	Doc string
	// RoutesFromDoc: only the /api routes Doc lists are served; the others
	// answer 404 with an empty body.
	RoutesFromDoc bool
	// NoWebUI: paths outside /api and /openapi.json answer 404 with an
	// empty body, not the web UI's 200 HTML (or 405).
	NoWebUI bool
	// EmptyUnauthorized: a 401 has an empty body (only www-authenticate),
	// not an UnauthorizedError.
	EmptyUnauthorized bool
	// NoShutdownEvent: no location.shutdown; a disposal (Shutdown, DELETE
	// /api/debug/location, Reload) publishes mcp.status.changed for each
	// of the location's servers instead.
	NoShutdownEvent bool
	// ExecutionWithoutLocation: session.execution.* events carry no
	// location.
	ExecutionWithoutLocation bool
	// HeartbeatAtConnect: a ": heartbeat" comment follows server.connected
	// at once.
	HeartbeatAtConnect bool
}

//go:embed testdata/opencode-v2-preview-openapi.json
var previewDoc string

// PreviewDoc is the v2 preview build's own GET /openapi.json (upstream v2
// branch at 44b6938b, "OpenCode 2.0 preview", 93 paths).
var PreviewDoc = previewDoc

// The profiles.
var (
	// Release2021 is OpenCode 2.0.21 as docs/opencode.md (its OpenCode 2.x part)
	// describe it (the default).
	Release2021 = Profile{Name: "2.0.21", Version: DefaultVersion, PID: DefaultPID, Doc: DefaultDoc}
	// Preview is the v2 preview build of docs/opencode.md#the-v2-preview-build-measured.
	Preview = Profile{Name: "preview", Version: PreviewVersion, PID: PreviewPID, Doc: previewDoc,
		RoutesFromDoc: true, NoWebUI: true, EmptyUnauthorized: true, NoShutdownEvent: true,
		ExecutionWithoutLocation: true, HeartbeatAtConnect: true}
)

// What the preview build reports.
const (
	PreviewVersion = "0.0.0-v2src-44b6938b"
	PreviewPID     = 27820
)

// Routes as recorded in Request.Route.
const (
	RouteHealthV2      = "/api/health"
	RouteLocations     = "/api/debug/location"
	RouteEvict         = "DELETE /api/debug/location"
	RouteInfo          = "/api/info"
	RouteMCP           = "/api/mcp"
	RouteConnect       = "/api/experimental/mcp/{name}/connect"
	RouteConnectDev    = "/api/mcp/{name}/connect"
	RouteDisconnect    = "/api/experimental/mcp/{name}/disconnect"
	RouteConfig        = "/api/config"
	RouteEvent         = "/api/event"
	RouteReload        = "/api/location/reload"
	RouteStatusOld     = "/api/status"
	RouteDoc           = "/openapi.json"
	RouteHealth        = "/global/health"
	RouteUnauthorized  = "401"
	RouteUnknownAPI    = "404"
	RouteWebUI         = "html"
	RouteMethodNotAllo = "405"
	RouteNotReady      = "503"
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
	// served lists the routes the doc offers ("METHOD template") when the
	// profile serves only those; nil serves every route the fake knows.
	served  map[string]bool
	missing map[string]bool // directories that answer 500 (and boot)

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

type sub struct {
	ch   chan []byte
	dead chan struct{} // closed when the subscriber fell queue frames behind
}

// New returns a fake of OpenCode 2.0.21 (Release2021) whose locations all
// have the given servers.
func New(servers map[string]Spec) *Server { return NewProfile(Release2021, servers) }

// NewPreview returns a fake of the v2 preview build (Preview).
func NewPreview(servers map[string]Spec) *Server { return NewProfile(Preview, servers) }

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

// Profile is the profile the fake was made with.
func (s *Server) Profile() Profile { return s.profile }

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/info", s.info)
	mux.HandleFunc("GET /api/health", s.health)
	mux.HandleFunc("GET /api/debug/location", s.locations)
	mux.HandleFunc("DELETE /api/debug/location", s.evict)
	mux.HandleFunc("POST /api/mcp/{name}/disconnect", s.disconnect)
	mux.HandleFunc("GET /api/mcp", s.status)
	mux.HandleFunc("POST "+RouteConnect, func(w http.ResponseWriter, r *http.Request) { s.connect(w, r, false) })
	mux.HandleFunc("POST "+RouteConnectDev, func(w http.ResponseWriter, r *http.Request) { s.connect(w, r, true) })
	mux.HandleFunc("POST "+RouteDisconnect, s.disconnect)
	mux.HandleFunc("GET /api/config", s.configRoute)
	mux.HandleFunc("GET /api/event", s.events)
	mux.HandleFunc("POST /api/location/reload", s.reload)
	mux.HandleFunc("GET /openapi.json", s.openapi)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, RouteUnknownAPI, "", "")
		w.WriteHeader(http.StatusNotFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if s.profile.NoWebUI {
			route := RouteWebUI
			if r.URL.Path == RouteHealth {
				route = RouteHealth
			}
			s.record(r, route, "", "")
			w.WriteHeader(http.StatusNotFound)
			return
		}
		// The web UI: any GET is its page, any other method 405.
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.record(r, RouteMethodNotAllo, "", "")
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		route := RouteWebUI
		if r.URL.Path == RouteHealth {
			route = RouteHealth
		}
		s.record(r, route, "", "")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><html><head><title>OpenCode</title></head><body><div id=\"root\"></div></body></html>\n"))
	})
	return mux
}

// ServeHTTP implements the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == RouteDoc) && !s.authorized(r) {
		s.record(r, RouteUnauthorized, "", "")
		w.Header().Set("Www-Authenticate", `Basic realm="Secure Area"`)
		if s.profile.EmptyUnauthorized {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		writeJSON(w, http.StatusUnauthorized, map[string]any{"_tag": "UnauthorizedError", "message": "Unauthorized"})
		return
	}
	s.mu.Lock()
	service := s.service
	s.mu.Unlock()
	if service != "" && (strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == RouteDoc) {
		s.record(r, RouteNotReady, "", "")
		w.Header().Set("Retry-After", "1")
		switch {
		case r.URL.Path == RouteHealthV2 && service == ServiceFailed:
			w.WriteHeader(http.StatusInternalServerError)
		case r.URL.Path == RouteHealthV2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"code": service})
		}
		return
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && !s.offered(r) {
		s.record(r, RouteUnknownAPI, "", "")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// offered reports whether the profile serves r's route: always, unless it
// serves only what its description lists.
func (s *Server) offered(r *http.Request) bool {
	s.mu.Lock()
	served := s.served
	s.mu.Unlock()
	if served == nil {
		// 2.0.21 has none of the preview build's own routes (2.0.20
		// answers /api/health 404).
		return !previewOnly[r.Method+" "+template(r.URL.Path)]
	}
	return served[r.Method+" "+template(r.URL.Path)] || r.Method == http.MethodHead && served["GET "+template(r.URL.Path)]
}

// previewOnly are the routes only the preview profile serves.
var previewOnly = map[string]bool{
	"GET /api/health": true, "GET /api/debug/location": true, "DELETE /api/debug/location": true,
	"POST /api/mcp/{}/disconnect": true,
}

// template erases path parameters for matching a request against the
// description: every segment after /api/mcp/ or /api/experimental/mcp/
// but the last, as OpenCode's {server}.
func template(p string) string {
	segs := strings.Split(strings.TrimSuffix(p, "/"), "/")
	for i, seg := range segs {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			segs[i] = "{}"
		}
	}
	t := strings.Join(segs, "/")
	for _, prefix := range []string{"/api/mcp/", "/api/experimental/mcp/"} {
		rest, ok := strings.CutPrefix(t, prefix)
		if !ok || rest == "resource" {
			continue
		}
		if i := strings.LastIndex(rest, "/"); i >= 0 {
			return prefix + "{}" + rest[i:]
		}
		return prefix + "{}"
	}
	return t
}

// docRoutes lists the "METHOD template" routes of an OpenAPI document
// (read as the client reads it); nil when it is not one.
func docRoutes(doc []byte) map[string]bool {
	d, err := apidesc.Parse(doc)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, p := range d.Paths() {
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if _, ok := d.Offers(m, p); ok {
				out[m+" "+template(p)] = true
			}
		}
	}
	return out
}

func (s *Server) authorized(r *http.Request) bool {
	s.mu.Lock()
	pw := s.Password
	s.mu.Unlock()
	if pw == "" {
		return true
	}
	if u, p, ok := r.BasicAuth(); ok {
		return u == "opencode" && p == pw
	}
	if tok := r.URL.Query().Get("auth_token"); tok != "" {
		b, err := base64.StdEncoding.DecodeString(tok)
		return err == nil && string(b) == "opencode:"+pw
	}
	return false
}

// location is the directory r selects, as 2.x's requestRef does.
func (s *Server) location(r *http.Request) (dir string, viaHeader bool) {
	if d := r.URL.Query().Get("location[directory]"); d != "" {
		return d, false
	}
	if h := r.Header.Get("x-opencode-directory"); h != "" {
		d, err := url.PathUnescape(h)
		if err != nil {
			d = h
		}
		return d, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Home, false
}

// record notes r; dir "" means the route takes no location.
func (s *Server) record(r *http.Request, route, dir, name string) {
	via := false
	if dir != "" {
		_, via = s.location(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Time: time.Now(), Method: r.Method, Route: route, Directory: dir,
		Name: name, LegacyDirectory: r.URL.Query().Get("directory"), ViaHeader: via, RawQuery: r.URL.RawQuery})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
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
// development builds did; /api/experimental/... then answers a 404
// without _tag, like any unknown /api route.
func (s *Server) SetDevConnectRoute(dev bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devRoute = dev
}

// SetHeartbeat sets the period of ": heartbeat" comments (0: none).
func (s *Server) SetHeartbeat(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heartbeat = d
}

// SetDoc sets what GET /openapi.json answers (default: the profile's
// Doc). In a profile that serves only what its description lists, the
// routes follow it (a document that is not one serves every route).
func (s *Server) SetDoc(doc []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setDocLocked(doc)
}

func (s *Server) setDocLocked(doc []byte) {
	s.doc = doc
	if s.profile.RoutesFromDoc {
		s.served = docRoutes(doc)
	}
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
// server's machine: the preview build answers 500 with an empty body to a
// location-scoped request for it, and boots the location anyway.
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
// activity, and publishes location.shutdown. The next location-scoped
// request boots it again.
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
	names := sortedNames(s.loc[dir])
	for _, st := range s.loc[dir] {
		st.bump()
	}
	delete(s.loc, dir)
	if s.profile.NoShutdownEvent {
		// The preview build stops the location's MCP servers, and each
		// stop is a status change (a read now boots the location again).
		for _, name := range names {
			s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
		}
		return
	}
	s.emitLocked(dir, "location.shutdown", map[string]any{})
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

// Subscribers is the number of open /api/event streams.
func (s *Server) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Publish sends an event on /api/event: {id, created, type, location (when
// dir is set), data}.
func (s *Server) Publish(dir, typ string, data map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(dir, typ, data)
}

// PublishRaw sends a raw data field (for garbage tests).
func (s *Server) PublishRaw(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendLocked(data)
}

func (s *Server) emitLocked(dir, typ string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	s.seq++
	msg := map[string]any{"id": fmt.Sprintf("evt_%04d", s.seq), "created": time.Now().UnixMilli(), "type": typ, "data": data}
	if s.profile.ExecutionWithoutLocation && strings.HasPrefix(typ, "session.execution.") {
		dir = ""
	}
	if dir != "" {
		msg["location"] = map[string]any{"directory": dir}
	}
	b, _ := json.Marshal(msg)
	s.sendLocked(b)
}

func (s *Server) sendLocked(b []byte) {
	for sb := range s.subs {
		select {
		case sb.ch <- b:
		default:
			// 2.x ends the response of a subscriber that fell too far
			// behind, rather than dropping single events.
			close(sb.dead)
			delete(s.subs, sb)
		}
	}
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
// (each publishes location.shutdown; the next request boots it again),
// without recording a request.
func (s *Server) Reload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for dir := range s.loc {
		s.shutdownLocked(dir)
	}
}

// --- handlers ---

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	s.record(r, RouteInfo, "", "")
	s.mu.Lock()
	body := map[string]any{"version": s.Version, "pid": s.PID, "urls": []string{"http://127.0.0.1:49374"},
		"paths": map[string]any{"tmp": "/tmp/opencode", "home": s.Home}}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.record(r, RouteHealthV2, "", "")
	s.mu.Lock()
	body := map[string]any{"healthy": true, "version": s.Version, "pid": s.PID}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

// locations lists the booted locations, booting none (the preview build's
// GET /api/debug/location).
func (s *Server) locations(w http.ResponseWriter, r *http.Request) {
	s.record(r, RouteLocations, "", "")
	s.mu.Lock()
	out := []map[string]any{}
	for _, d := range s.instancesLocked() {
		out = append(out, map[string]any{"directory": d})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// evict disposes a location (DELETE /api/debug/location): its MCP servers
// stop, each announced by mcp.status.changed.
func (s *Server) evict(w http.ResponseWriter, r *http.Request) {
	dir, _ := s.location(r)
	s.record(r, RouteEvict, dir, "")
	s.mu.Lock()
	s.shutdownLocked(dir)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	dir, _ := s.location(r)
	s.record(r, RouteMCP, dir, "")
	serve, leave := s.Enter(w, r, dir)
	defer leave()
	if !serve {
		return
	}
	s.mu.Lock()
	l := s.bootLocked(dir)
	if s.missing[dir] {
		s.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	data := []map[string]any{}
	for _, name := range sortedNames(l) {
		st := map[string]any{"status": l[name].status}
		if l[name].err != "" {
			st["error"] = l[name].err
		}
		item := map[string]any{"name": name, "status": st}
		if l[name].spec.Type == "remote" {
			// OpenCode ties each remote server to an integration.
			item["integrationID"] = "mcp_fake_" + url.PathEscape(name)
		}
		data = append(data, item)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"location": map[string]any{"directory": dir, "project": map[string]any{"id": "prj_fake", "directory": dir}},
		"data":     data,
	})
}

func sortedNames(l map[string]*state) []string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request, dev bool) {
	s.mu.Lock()
	// A profile that serves what its description lists has decided
	// already; otherwise SetDevConnectRoute picks the one connect route.
	served := s.served != nil || s.devRoute == dev
	s.mu.Unlock()
	if !served {
		s.record(r, RouteUnknownAPI, "", "")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	s.mu.Lock()
	notYet := s.notYetConnects > 0
	if notYet {
		s.notYetConnects--
	}
	after := s.notYetAfter
	s.mu.Unlock()
	if notYet {
		s.record(r, RouteNotReady, "", "")
		w.Header().Set("Retry-After", strconv.Itoa(int(after/time.Second)))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"code": ServiceStopping})
		return
	}
	route := RouteConnect
	if dev {
		route = RouteConnectDev
	}
	name := r.PathValue("name")
	dir, _ := s.location(r)
	s.record(r, route, dir, name)
	s.mu.Lock()
	st := s.bootLocked(dir)[name]
	if s.missing[dir] {
		s.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if st == nil || st.spec.ConnectNotFound {
		s.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]any{"_tag": "McpServerNotFoundError", "server": name, "message": "MCP server not found: " + name})
		return
	}
	s.connecting++
	s.maxConnecting = max(s.maxConnecting, s.connecting)
	// Connect is stop + start, whatever the status: "pending" while the
	// attempt runs, then AfterConnect (default: as it was).
	to, errText := st.status, st.err
	if to == "pending" {
		to, errText = outcome(st.spec), st.spec.Error
	}
	if st.spec.AfterConnect != "" {
		to, errText = st.spec.AfterConnect, st.spec.Error
	}
	if st.spec.Type == "remote" {
		if e, limited := s.rateLimitedLocked(st.spec.URL); limited {
			to, errText = "failed", e
		}
	}
	delay := st.spec.ConnectDelay
	if delay <= 0 {
		delay = s.pending
	}
	over := s.startLocked(dir, name, st, to, errText, delay, true)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.connecting--
		s.mu.Unlock()
	}()
	// 2.x answers when the attempt is over.
	select {
	case <-over:
	case <-r.Context().Done():
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) disconnect(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	dir, _ := s.location(r)
	s.record(r, RouteDisconnect, dir, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.bootLocked(dir)[name]
	if st == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"_tag": "McpServerNotFoundError", "server": name, "message": "MCP server not found: " + name})
		return
	}
	st.bump()
	st.status, st.err = "disabled", ""
	s.emitLocked(dir, "mcp.status.changed", map[string]any{"server": name})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) configRoute(w http.ResponseWriter, r *http.Request) {
	dir, _ := s.location(r)
	s.record(r, RouteConfig, dir, "")
	s.mu.Lock()
	if s.configFailures > 0 {
		s.configFailures--
		s.mu.Unlock()
		writeJSON(w, http.StatusInternalServerError, map[string]any{"_tag": "UnknownError", "message": "config unavailable"})
		return
	}
	servers := map[string]any{}
	for name, st := range s.bootLocked(dir) {
		e := map[string]any{"type": "local", "command": []string{"node", "server.js"}}
		if st.spec.Type == "remote" {
			e = map[string]any{"type": "remote", "url": st.spec.URL}
			if st.spec.Headers != nil {
				e["headers"] = st.spec.Headers
			}
		}
		if st.spec.Status == "disabled" {
			e["disabled"] = true
		}
		servers[name] = e
	}
	home := s.Home
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, []any{
		map[string]any{"type": "directory", "path": home + "/.config/opencode"},
		map[string]any{"type": "document", "path": strings.TrimSuffix(dir, "/") + "/opencode.jsonc",
			"info": map[string]any{"mcp": map[string]any{"servers": servers}}},
	})
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	s.record(r, RouteReload, "", "")
	s.Reload()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	s.record(r, RouteDoc, "", "")
	s.mu.Lock()
	doc, fail := s.doc, s.docFailures > 0
	if fail {
		s.docFailures--
	}
	s.mu.Unlock()
	if fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	s.record(r, RouteEvent, "", "")
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no flusher", http.StatusInternalServerError)
		return
	}
	sb := &sub{ch: make(chan []byte, queue), dead: make(chan struct{})}
	s.mu.Lock()
	s.subs[sb] = struct{}{}
	hb := s.heartbeat
	s.seq++
	first := fmt.Sprintf(`{"id":"evt_%04d","type":"server.connected","data":{}}`, s.seq)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, sb)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = sse.Write(w, "", []byte(first))
	if s.profile.HeartbeatAtConnect {
		_, _ = w.Write([]byte(": heartbeat\n\n"))
	}
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
		case <-sb.dead:
			return
		case b := <-sb.ch:
			if sse.Write(w, "", b) != nil {
				return
			}
			fl.Flush()
		case <-tick:
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// Serve serves the fake on an in-memory pipe and returns the transport to
// reach it and a stop function that closes everything (call it before a
// synctest bubble ends).
func (s *Server) Serve() (*http.Transport, func()) { return fakeopencode.ServeHandler(s) }

// DefaultDoc is the OpenAPI description the fake serves: the routes,
// parameters, statuses and event types the 2.x client relies on, in the
// shape of 2.x's /openapi.json.
const DefaultDoc = `{
  "openapi": "3.1.0",
  "info": {"title": "opencode", "version": "2.0.21"},
  "paths": {
    "/api/info": {"get": {"operationId": "server.info", "responses": {"200": {"description": "info"}}}},
    "/api/mcp": {"get": {"operationId": "mcp.list",
      "parameters": [{"name": "location[directory]", "in": "query", "required": false, "schema": {"type": "string"}},
                     {"name": "x-opencode-directory", "in": "header", "required": false, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "status"}}}},
    "/api/experimental/mcp/{name}/connect": {"post": {"operationId": "mcp.connect",
      "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                     {"name": "location[directory]", "in": "query", "required": false, "schema": {"type": "string"}}],
      "responses": {"204": {"description": "connected"}, "404": {"description": "McpServerNotFoundError"}}}},
    "/api/experimental/mcp/{name}/disconnect": {"post": {"operationId": "mcp.disconnect",
      "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"204": {"description": "disconnected"}}}},
    "/api/config": {"get": {"operationId": "config.get",
      "parameters": [{"name": "location[directory]", "in": "query", "required": false, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "config layers"}}}},
    "/api/event": {"get": {"operationId": "event.subscribe", "responses": {"200": {"description": "event stream"}}}}
  },
  "components": {"schemas": {
    "McpStatus": {"anyOf": [
      {"type": "object", "properties": {"status": {"const": "connected"}}},
      {"type": "object", "properties": {"status": {"const": "pending"}}},
      {"type": "object", "properties": {"status": {"const": "disabled"}}},
      {"type": "object", "properties": {"status": {"const": "failed"}, "error": {"type": "string"}}},
      {"type": "object", "properties": {"status": {"const": "needs_auth"}}},
      {"type": "object", "properties": {"status": {"const": "needs_client_registration"}, "error": {"type": "string"}}}]},
    "Event": {"anyOf": [
      {"type": "object", "properties": {"type": {"const": "server.connected"}}},
      {"type": "object", "properties": {"type": {"const": "mcp.status.changed"}}},
      {"type": "object", "properties": {"type": {"const": "location.shutdown"}}},
      {"type": "object", "properties": {"type": {"const": "session.execution.started"}}},
      {"type": "object", "properties": {"type": {"const": "session.execution.succeeded"}}},
      {"type": "object", "properties": {"type": {"const": "session.execution.failed"}}},
      {"type": "object", "properties": {"type": {"const": "session.execution.interrupted"}}}]}
  }}
}
`
