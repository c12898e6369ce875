package fake2

import _ "embed"

// The profiles: the kinds of OpenCode 2 server the fake imitates
// (Release2021, Preview), what tells them apart, and the API description
// each serves at GET /openapi.json.

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

// Profile is the profile the fake was made with.
func (s *Server) Profile() Profile { return s.profile }

// DefaultDoc is the OpenAPI description the Release2021 profile serves:
// 2.0.21's GET /openapi.json as far as it is known without a 2.0.21
// binary (hand-built from the v2 HttpApi's generated description and
// docs/opencode.md; its x-mcp-reconnect-provenance says so), response
// schemas included. The doctor's 2.x checks read this same file.
//
//go:embed testdata/opencode-2.0.21-openapi.json
var DefaultDoc string
