package opencode

import "slices"

// The routes of OpenCode 2.1.2 (its description: docs/opencode.md#the-2x-surface-and-its-authentication),
// the 2.x release the daemon targets. A route that answers 404 without an
// OpenCode error tag, or 405, is one this server lacks: the capability is
// a stated gap (Capabilities, status runs_without, doctor), asked again
// only after a backoff step, so one wrong answer neither turns it off for
// a whole detection nor costs a request per call.

// The capabilities a ClientV2 reports (Capability.Name).
const (
	// CapVersion: the server's version and pid (GET /api/info).
	CapVersion = "version"
	// CapStatus: MCP status of a location (GET /api/mcp).
	CapStatus = "mcp-status"
	// CapConnect: (re)connect an MCP server (POST
	// /api/experimental/mcp/{name}/connect).
	CapConnect = "connect"
	// CapConfig: a location's resolved config (GET /api/config), which
	// tells remote servers and their endpoints from local ones.
	CapConfig = "config"
	// CapEvents: the event stream (GET /api/event).
	CapEvents = "events"
	// CapLocations: the booted locations, listed without booting one (GET
	// /api/debug/location).
	CapLocations = "locations"
)

// Capability is one thing the daemon uses of an OpenCode 2 server, and
// whether this server offers it.
type Capability struct {
	// Name is one of the Cap constants.
	Name string `json:"name"`
	// Route is the method and path the client uses, e.g. "GET
	// /api/info".
	Route string `json:"route"`
	// Missing says why the server lacks it for now ("" when it has it).
	Missing string `json:"missing,omitempty"`
	// Without says what the daemon does without it.
	Without string `json:"without"`
}

// routesV2 is the route of each capability, in the order Capabilities
// reports them, and what the daemon does without it.
var routesV2 = []struct{ name, route, without string }{
	{CapVersion, "GET /api/info", "the version found at detection is kept"},
	{CapStatus, "GET /api/mcp", "no MCP server can be checked"},
	{CapConnect, "POST /api/experimental/mcp/{name}/connect", "no MCP server can be reconnected"},
	{CapConfig, "GET /api/config", "server kinds unknown: every server is budgeted as local, remote endpoints are not probed, a restarted remote server is not repaired"},
	{CapEvents, "GET /api/event", "directories are checked on the idle interval only"},
	{CapLocations, "GET /api/debug/location", "a disposed location cannot be told from a booted one without booting it"},
}

// routeV2 is the route of capability name, and what the daemon does
// without it.
func routeV2(name string) (route, without string) {
	i := slices.IndexFunc(routesV2, func(r struct{ name, route, without string }) bool { return r.name == name })
	return routesV2[i].route, routesV2[i].without
}
