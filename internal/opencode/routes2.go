package opencode

import (
	"strings"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
)

// Each OpenCode 2 release has moved something the daemon uses (2.0.0–2.0.5
// reported its version at /api/status, 2.0.6 at /api/info, the v2 preview
// build at /api/health; connect moved under /api/experimental; the preview
// has no /api/config). So a ClientV2 reads the server's own description,
// GET /openapi.json (package apidesc), and takes each route from what that
// server offers. The routes docs/opencode.md#routes-move-between-2x-releases lists are the defaults while there is no
// description: for good when the server has none (404, or an answer that
// is not one), for now when the read failed (a 5xx, a timeout, a body
// cut short: a busy or starting server, a dropped connection), and then
// it is read again with backoff until it answers. A route the server
// lacks is a capability the daemon runs without, and a route that
// answers 404 without an OpenCode error tag is left alone for a backoff
// step and then asked again: one wrong answer neither turns a capability
// off for a whole detection nor costs a request per call.

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
	// CapConfig: a location's resolved config (GET /api/config), which
	// tells remote servers and their endpoints from local ones.
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
	// server's GET /openapi.json, false for the documented defaults.
	FromDescription bool `json:"from_description"`
	// Missing says why Route is "".
	Missing string `json:"missing,omitempty"`
	// Without says what the daemon does without it ("" when it has it).
	Without string `json:"without,omitempty"`
}

// Available reports whether the server offers the capability.
func (c Capability) Available() bool { return c.Route != "" }

// The routes a ClientV2 may use, in order of preference.
const (
	routeInfo      = "/api/info"
	routeHealthV2  = "/api/health"
	routeStatusOld = "/api/status"
	routeMCP       = "/api/mcp"
	routeConfigV2  = "/api/config"
	routeEventV2   = "/api/event"
	routeLocations = "/api/debug/location"
	// connect: 2.0.21's route, then the development and preview builds'.
	routeConnectExp = "/api/experimental/mcp/{name}/connect"
	routeConnectDev = "/api/mcp/{name}/connect"
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

// routeSet is every choice made from one read of the description.
type routeSet struct {
	doc     *apidesc.Doc
	docNote string // why the description was not used ("" when it was)
	// provisional: the read failed and is to be retried; the defaults
	// stand in until it answers.
	provisional bool
	choices     []choice
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
	CapConfig:    "server kinds unknown: every server is budgeted as local, remote endpoints are not probed, a restarted remote server is not repaired",
	CapEvents:    "directories are checked on the idle interval only",
	CapLocations: "a disposed location cannot be told from a booted one without booting it",
}

// chooseRoutes picks every route from doc, or the documented defaults (docs/opencode.md#routes-move-between-2x-releases) when doc
// is nil (note says why; provisional when it is to be read again).
func chooseRoutes(doc *apidesc.Doc, note string, provisional bool) *routeSet {
	rs := &routeSet{doc: doc, docNote: note, provisional: provisional}
	pick := func(name, method string, candidates []string, defaults []string) {
		c := choice{name: name, method: method, fromDoc: doc != nil}
		if doc == nil {
			c.paths = defaults
			switch {
			case len(defaults) > 0:
			case provisional:
				c.missing = "the API description could not be read yet (" + note + "; asked again with backoff)"
			default:
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
			if provisional && name == CapLocations {
				c.without = "checks of directories OpenCode armed wait for it, for a few failed reads (or use the route if it answered before)"
			}
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
