package opencode

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Each OpenCode 2 release has moved something the daemon uses (2.0.0–2.0.5
// reported its version at /api/status, 2.0.6 at /api/info, the v2 preview
// build at /api/health; connect moved under /api/experimental; the preview
// has no /api/config). So a ClientV2 reads the server's own description,
// GET /openapi.json, once per detection, and takes each route from what
// that server offers. The facts' routes are the defaults when there is no
// readable description. A route the server lacks is a capability the
// daemon runs without, and a route that answers 404 without an OpenCode
// error tag is dropped until the next detection (a new ClientV2): never a
// request repeated for ever.

// The capabilities a ClientV2 reports (Capability.Name).
const (
	// CapVersion: the server's version and pid (GET /api/info, /api/health
	// or /api/status).
	CapVersion = "version"
	// CapStatus: MCP status of a location (GET /api/mcp).
	CapStatus = "mcp-status"
	// CapConnect: (re)connect an MCP server (POST
	// /api/experimental/mcp/{name}/connect or /api/mcp/{name}/connect).
	CapConnect = "connect"
	// CapConfig: a location's resolved config (GET /api/config). Without
	// it, server kinds and remote URLs come from the config files OpenCode
	// reads (when it runs on this machine) and from integrationID.
	CapConfig = "config"
	// CapEvents: the event stream (GET /api/event).
	CapEvents = "events"
	// CapLocations: the booted locations, listed without booting one (GET
	// /api/debug/location on the v2 preview build).
	CapLocations = "locations"
)

// Capability is one thing the daemon uses of an OpenCode 2 server, and
// how this server offers it.
type Capability struct {
	// Name is one of the Cap constants.
	Name string `json:"name"`
	// Route is the method and path the client uses, e.g. "GET
	// /api/health"; "" when the server lacks the capability.
	Route string `json:"route,omitempty"`
	// FromDescription is true when Route (or its absence) comes from the
	// server's GET /openapi.json, false for the facts' default.
	FromDescription bool `json:"from_description"`
	// Missing says why Route is "".
	Missing string `json:"missing,omitempty"`
	// Without says what the daemon does without it ("" when it has it).
	Without string `json:"without,omitempty"`
}

// Available reports whether the server offers the capability.
func (c Capability) Available() bool { return c.Route != "" }

// APIDescription is what the client reads of an OpenCode 2 server's GET
// /openapi.json: which routes it offers.
type APIDescription struct {
	// Title and Version are the description's info.title and info.version
	// (the API's version, not OpenCode's).
	Title, Version string
	// routes maps "METHOD template" (path parameters erased to "{}") to
	// the path as documented.
	routes map[string]string
	paths  int
}

// maxDescriptionPaths bounds how many paths a description may list
// (OpenCode's have about a hundred).
const maxDescriptionPaths = 10000

// ParseAPIDescription decodes an OpenAPI document: a JSON object with a
// "paths" object of path items, each an object of operations by method.
// A document that lists no /api/ route is not an OpenCode 2 description
// and is an error, as is anything that is not that shape; odd path items
// are skipped, not fatal.
func ParseAPIDescription(b []byte) (*APIDescription, error) {
	var raw struct {
		Info *struct {
			Title   json.RawMessage `json:"title"`
			Version json.RawMessage `json:"version"`
		} `json:"info"`
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON OpenAPI document: %w", err)
	}
	if raw.Paths == nil {
		return nil, errors.New(`no "paths" object`)
	}
	if len(raw.Paths) > maxDescriptionPaths {
		return nil, fmt.Errorf("%d paths: more than %d", len(raw.Paths), maxDescriptionPaths)
	}
	d := &APIDescription{routes: map[string]string{}, paths: len(raw.Paths)}
	if raw.Info != nil {
		_ = json.Unmarshal(raw.Info.Title, &d.Title)
		_ = json.Unmarshal(raw.Info.Version, &d.Version)
	}
	api := false
	// Sorted, so that of two paths of one template the same one wins.
	paths := make([]string, 0, len(raw.Paths))
	for p := range raw.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") {
			continue
		}
		var item map[string]json.RawMessage
		if json.Unmarshal(raw.Paths[p], &item) != nil {
			continue
		}
		for method, op := range item {
			m := strings.ToUpper(method)
			if !httpMethod(m) || len(op) == 0 || op[0] != '{' {
				continue
			}
			key := m + " " + pathTemplate(p)
			if _, dup := d.routes[key]; !dup {
				d.routes[key] = p
			}
			if strings.HasPrefix(p, "/api/") {
				api = true
			}
		}
	}
	if !api {
		return nil, errors.New("lists no /api/ route: not an OpenCode 2 description")
	}
	return d, nil
}

func httpMethod(m string) bool {
	switch m {
	case "GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE":
		return true
	}
	return false
}

// pathTemplate erases the parameter names of a path: OpenCode calls the
// server "{server}" where the client says "{name}".
func pathTemplate(p string) string {
	segs := strings.Split(strings.TrimSuffix(p, "/"), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") || strings.HasPrefix(s, ":") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

// Offers reports whether the description lists method and path (path
// parameter names do not matter), and the path as documented.
func (d *APIDescription) Offers(method, path string) (string, bool) {
	if d == nil {
		return "", false
	}
	p, ok := d.routes[strings.ToUpper(method)+" "+pathTemplate(path)]
	return p, ok
}

// Paths is how many paths the description lists.
func (d *APIDescription) Paths() int {
	if d == nil {
		return 0
	}
	return d.paths
}

// The routes a ClientV2 may use, in order of preference.
const (
	routeInfo      = "/api/info"
	routeHealthV2  = "/api/health"
	routeStatusOld = "/api/status"
	routeMCP       = "/api/mcp"
	routeConfigV2  = "/api/config"
	routeEventV2   = "/api/event"
	routeLocations = "/api/debug/location"
)

// choice is the route or routes chosen for one capability.
type choice struct {
	name string
	// paths are the candidates, best first (connect and version have
	// several when there is no description).
	paths   []string
	method  string
	fromDoc bool
	missing string
	without string
}

// routeSet is every choice of one detection.
type routeSet struct {
	doc     *APIDescription
	docNote string // why the description was not used ("" when it was)
	choices []choice
}

func (rs *routeSet) get(name string) *choice {
	for i := range rs.choices {
		if rs.choices[i].name == name {
			return &rs.choices[i]
		}
	}
	return nil
}

// What the daemon does without each capability.
var withoutCap = map[string]string{
	CapVersion:   "the version found at detection is kept",
	CapStatus:    "no MCP server can be checked",
	CapConnect:   "no MCP server can be reconnected",
	CapConfig:    "server kinds and remote URLs come from the config files and integrationID",
	CapEvents:    "directories are checked on the idle interval only",
	CapLocations: "a disposed location cannot be told from a booted one without booting it",
}

// chooseRoutes picks every route from doc, or the facts' defaults when doc
// is nil (note says why).
func chooseRoutes(doc *APIDescription, note string) *routeSet {
	rs := &routeSet{doc: doc, docNote: note}
	pick := func(name, method string, candidates []string, defaults []string) {
		c := choice{name: name, method: method, fromDoc: doc != nil}
		if doc == nil {
			c.paths = defaults
			if len(defaults) == 0 {
				c.missing = "no API description (" + note + "): not tried"
			}
		} else {
			for _, p := range candidates {
				if _, ok := doc.Offers(method, p); ok {
					c.paths = append(c.paths, p)
				}
			}
			if len(c.paths) == 0 {
				c.missing = "not in the server's API description (" + method + " " + strings.Join(candidates, ", ") + ")"
			}
		}
		if len(c.paths) == 0 {
			c.without = withoutCap[name]
		}
		rs.choices = append(rs.choices, c)
	}
	pick(CapVersion, "GET", []string{routeInfo, routeHealthV2, routeStatusOld}, []string{routeInfo, routeHealthV2, routeStatusOld})
	pick(CapStatus, "GET", []string{routeMCP}, []string{routeMCP})
	pick(CapConnect, "POST", []string{routeConnectExp, routeConnectDev}, []string{routeConnectExp, routeConnectDev})
	pick(CapConfig, "GET", []string{routeConfigV2}, []string{routeConfigV2})
	pick(CapEvents, "GET", []string{routeEventV2}, []string{routeEventV2})
	// Not a default: no fact says 2.0.21 has it, and without a
	// description the daemon behaves as before.
	pick(CapLocations, "GET", []string{routeLocations}, nil)
	return rs
}
