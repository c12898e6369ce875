package fake2

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The HTTP side of the fake: its routes and handlers, authentication, the
// choice of location, what a profile's description serves and what it
// answers 404, and the recording of every request. The event stream is in
// events.go.

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
		writeJSON(w, http.StatusUnauthorized, map[string]any{"_tag": "UnauthorizedError", "message": "Authentication required"})
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

// offered reports whether the fake serves r's route: one its description
// lists, or any when the description is none.
func (s *Server) offered(r *http.Request) bool {
	s.mu.Lock()
	served := s.served
	s.mu.Unlock()
	if served == nil {
		return true
	}
	return served[r.Method+" "+template(r.URL.Path)] || r.Method == http.MethodHead && served["GET "+template(r.URL.Path)]
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

// docRoutes lists the "METHOD template" routes of an OpenAPI document;
// nil when it is not one.
func docRoutes(doc []byte) map[string]bool {
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if json.Unmarshal(doc, &d) != nil || d.Paths == nil {
		return nil
	}
	out := map[string]bool{}
	for p, item := range d.Paths {
		for m := range item {
			if m = strings.ToUpper(m); m != "PARAMETERS" {
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

// writeJSON answers v as 2.x does: compact, without a final newline.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	s.record(r, RouteInfo, "", "")
	type paths struct {
		Tmp string `json:"tmp"`
	}
	type capabilities struct {
		PersistentPty bool `json:"persistentPty"`
	}
	s.mu.Lock()
	// 2.1.2's fields, in its order.
	body := struct {
		Version      string       `json:"version"`
		PID          int          `json:"pid"`
		URLs         []string     `json:"urls"`
		Paths        paths        `json:"paths"`
		Capabilities capabilities `json:"capabilities"`
	}{s.Version, s.PID, []string{"http://127.0.0.1:49374"}, paths{"/tmp/opencode"}, capabilities{true}}
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

// bootForLocked is the location a location-scoped request for dir
// finds, booting it if it was not booted: unlisted when this request
// booted it and the profile registers its servers only later
// (EmptyFirstRead); missing when dir does not exist (writeMissing
// answers).
func (s *Server) bootForLocked(dir string) (l map[string]*state, unlisted, missing bool) {
	_, booted := s.loc[dir]
	if s.missing[dir] {
		if s.profile.MissingAs500 {
			s.bootLocked(dir)
		}
		return nil, false, true
	}
	return s.bootLocked(dir), !booted && s.profile.EmptyFirstRead, false
}

// writeMissing answers a request for a directory that does not exist.
func (s *Server) writeMissing(w http.ResponseWriter, dir string) {
	if s.profile.MissingAs500 {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"_tag": "LocationNotFoundError",
		"location": map[string]any{"directory": dir}, "message": "Location not found: " + dir})
}

// writeNoServer answers a request for a server the location does not
// list.
func writeNoServer(w http.ResponseWriter, name string) {
	writeJSON(w, http.StatusNotFound, struct {
		Tag     string `json:"_tag"`
		Server  string `json:"server"`
		Message string `json:"message"`
	}{"McpServerNotFoundError", name, "MCP server not found: " + name})
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
	l, unlisted, missing := s.bootForLocked(dir)
	if missing {
		s.mu.Unlock()
		s.writeMissing(w, dir)
		return
	}
	if unlisted {
		l = nil
	}
	// 2.1.2's fields, in its order.
	type status struct {
		Status string `json:"status"`
		Error  string `json:"error,omitempty"`
	}
	type server struct {
		Name          string `json:"name"`
		Status        status `json:"status"`
		IntegrationID string `json:"integrationID,omitempty"`
	}
	data := []server{}
	for _, name := range sortedNames(l) {
		item := server{Name: name, Status: status{l[name].status, l[name].err}}
		if l[name].spec.Type == "remote" {
			// OpenCode ties each remote server to an integration.
			item.IntegrationID = "mcp_fake_" + url.PathEscape(name)
		}
		data = append(data, item)
	}
	s.mu.Unlock()
	type location struct {
		Directory string `json:"directory"`
	}
	writeJSON(w, http.StatusOK, struct {
		Location location `json:"location"`
		Data     []server `json:"data"`
	}{location{dir}, data})
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
	l, unlisted, missing := s.bootForLocked(dir)
	if missing {
		s.mu.Unlock()
		s.writeMissing(w, dir)
		return
	}
	st := l[name]
	if st == nil || unlisted || st.spec.ConnectNotFound {
		s.mu.Unlock()
		writeNoServer(w, name)
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
	l, unlisted, missing := s.bootForLocked(dir)
	if missing {
		s.writeMissing(w, dir)
		return
	}
	st := l[name]
	if st == nil || unlisted {
		writeNoServer(w, name)
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
	l, _, missing := s.bootForLocked(dir)
	if missing {
		s.mu.Unlock()
		s.writeMissing(w, dir)
		return
	}
	servers := map[string]any{}
	for name, st := range l {
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
