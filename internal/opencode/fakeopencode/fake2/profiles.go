package fake2

import _ "embed"

// The profiles: the kinds of OpenCode 2 server the fake imitates
// (Release212, Preview), what tells them apart, and the API description
// each serves at GET /openapi.json. Each serves the /api routes its
// description lists and answers any other 404 with an empty body, as the
// real servers do.

// Profile is the kind of OpenCode 2 server the fake imitates.
type Profile struct {
	// Name is "2.1.2" or "preview".
	Name string
	// Version and PID are what the version route reports.
	Version string
	PID     int
	// Doc is what GET /openapi.json answers; the /api routes it lists
	// are the ones served.
	Doc string
	// NoWebUI: paths outside /api and /openapi.json answer 404 with an
	// empty body, not the web UI's 200 HTML (or 405).
	NoWebUI bool
	// EmptyUnauthorized: a 401 has an empty body (only www-authenticate),
	// not an UnauthorizedError.
	EmptyUnauthorized bool
	// NoShutdownEvent: a disposal (Shutdown, DELETE /api/debug/location,
	// Reload) publishes no location.shutdown, only the
	// mcp.status.changed of the servers it stops.
	NoShutdownEvent bool
	// ExecutionWithoutLocation: session.execution.* events carry no
	// location.
	ExecutionWithoutLocation bool
	// EmptyFirstRead: the request that boots a location finds none of
	// its MCP servers registered yet: GET /api/mcp answers "data": [],
	// and a connect or disconnect 404 McpServerNotFoundError (2.1.2
	// takes about two seconds before the first server shows "pending").
	EmptyFirstRead bool
	// MissingAs500: a directory that does not exist (SetMissingDirectory)
	// answers 500 with an empty body, and is booted anyway; else 404
	// LocationNotFoundError, and nothing boots.
	MissingAs500 bool
}

//go:embed testdata/opencode-2.1.2-openapi.json
var release212Doc string

// DefaultDoc is the OpenAPI description the Release212 profile serves:
// OpenCode 2.1.2's own GET /openapi.json, recorded from the npm release
// (119 paths; testdata/README.md).
var DefaultDoc = release212Doc

//go:embed testdata/opencode-v2-preview-openapi.json
var previewDoc string

// PreviewDoc is the v2 preview build's own GET /openapi.json (upstream v2
// branch at 44b6938b, "OpenCode 2.0 preview", 93 paths).
var PreviewDoc = previewDoc

// The profiles.
var (
	// Release212 is the released OpenCode 2.1.2 as measured
	// (docs/opencode.md#opencode-2x; the default).
	Release212 = Profile{Name: "2.1.2", Version: DefaultVersion, PID: DefaultPID, Doc: release212Doc, EmptyFirstRead: true}
	// Preview is the v2 preview build of docs/opencode.md#the-v2-preview-build-measured.
	Preview = Profile{Name: "preview", Version: PreviewVersion, PID: PreviewPID, Doc: previewDoc,
		NoWebUI: true, EmptyUnauthorized: true, NoShutdownEvent: true, ExecutionWithoutLocation: true, MissingAs500: true}
)

// What the preview build reports.
const (
	PreviewVersion = "0.0.0-v2src-44b6938b"
	PreviewPID     = 4194320 // above any pid_max, as DefaultPID
)

// Profile is the profile the fake was made with.
func (s *Server) Profile() Profile { return s.profile }
