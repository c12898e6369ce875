package opencode

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
)

// The 2.x client and its calls: ClientV2, the engine's MCPStatus, Connect
// and MCPConfig, and Info, Doc and BootedLocations. How it sends and sorts
// a request is in v2transport.go, the parsers of the answers in v2parse.go,
// what it keeps of one process and its API description in v2desc.go, the
// route choices in routes2.go and the event stream in v2events.go.

// ClientV2 talks to one OpenCode 2.x server (see
// docs/opencode.md#the-2x-surface-and-its-authentication). It offers the request/response
// routes the engine uses with the same methods and types as the 1.x Client,
// so the engine cannot tell which generation it talks to. It shares the 1.x
// client's error type, timeouts, body limit, redirect policy and basic auth.
//
// One ClientV2 is one detection: it takes every route from the server's
// GET /openapi.json (see routes2.go); a route that answers 404 without an
// OpenCode error tag is asked again only after a backoff step. What
// outlives a detection (the API description, the sessions' directories,
// the routes that answered) is the process's memory, which a Server keeps
// for as long as the same OpenCode process answers: the description is
// read at the first call for a process, again with backoff while that
// read fails, and not again while the process answers (every re-subscribe
// of the event stream detects again).
type ClientV2 struct {
	c *Client
	// local: the server listens on a loopback address, so its config
	// files are this machine's.
	local bool
	mem   *processMemory

	mu  sync.Mutex
	log *slog.Logger
	// missing holds the "METHOD path" routes that answered 404 (without
	// an OpenCode error tag) or 405, each asked again after its backoff.
	missing map[string]*retry
	// integration holds, per directory, the servers its last status read
	// marked with an integrationID (remote servers).
	integration map[string]map[string]bool
	// empty holds the directories whose last status read listed no server.
	empty map[string]bool
}

// NewV2 returns a 2.x client for the server at rawURL. OpenCode 2.x always
// authenticates as user "opencode": leave Options.Username empty.
func NewV2(rawURL string, o Options) (*ClientV2, error) { return newV2(rawURL, o, newProcessMemory()) }

func newV2(rawURL string, o Options, mem *processMemory) (*ClientV2, error) {
	c, err := New(rawURL, o)
	if err != nil {
		return nil, err
	}
	return &ClientV2{c: c, local: loopback.Host(c.base.Host), log: slog.New(slog.DiscardHandler), mem: mem,
		missing: map[string]*retry{}, integration: map[string]map[string]bool{}, empty: map[string]bool{}}, nil
}

// SetLog sets where the client says which routes it chose and which
// capabilities the server lacks, once per answer of the description, and
// warns of a description it cannot read or a route that is missing
// (default: nowhere).
func (v *ClientV2) SetLog(l *slog.Logger) {
	if l == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.log = l
}

func (v *ClientV2) logger() *slog.Logger {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.log
}

// URL is the server's base URL, safe to log.
func (v *ClientV2) URL() string { return v.c.URL() }

// The operations of the calls, as errors and logs name them.
const (
	opMCPStatusV2 = "GET /api/mcp"
	opConfigV2    = "GET /api/config"
	opInfoV2      = "GET /api/info"
	opDocV2       = "GET /openapi.json"
)

// EmptyRereadDelay is how long MCPStatus waits before it reads again an
// answer that lists no server: right after a boot an empty list may not be
// final (docs/opencode.md#mcp-status-and-pending-2x).
const EmptyRereadDelay = 500 * time.Millisecond

// maxRemembered bounds the per-directory memories of a client (the
// integrationIDs and empty answers of its last reads).
const maxRemembered = 4096

// MCPStatus reads GET /api/mcp for dir's location. Reading it boots the
// location and starts its MCP servers if it is not running: call it only
// for directories in use. A server still starting reads StatusPending; a
// status string this package does not know is kept as it is. A failed
// server whose endpoint answered 429 is RateLimited (see rateLimited).
//
// An answer that lists no server is read once more, EmptyRereadDelay
// later, unless the directory's previous answer was empty too: right after
// a boot the list may not be final, and a directory that really has no
// server costs one read per check, not two.
func (v *ClientV2) MCPStatus(ctx context.Context, dir string) (map[string]ServerStatus, error) {
	st, err := v.readStatus(ctx, dir)
	if err != nil {
		return nil, err
	}
	if len(st) == 0 {
		v.mu.Lock()
		again := !v.empty[dir]
		v.mu.Unlock()
		if again {
			select {
			case <-ctx.Done():
				return nil, &Error{Op: opMCPStatusV2, URL: v.URL(), Detail: ctx.Err().Error(), kind: ErrUnavailable, cause: ctx.Err()}
			case <-time.After(EmptyRereadDelay):
			}
			if st, err = v.readStatus(ctx, dir); err != nil {
				return nil, err
			}
		}
	}
	v.remember(dir, st)
	return st, nil
}

// remember notes what a status read of dir showed.
func (v *ClientV2) remember(dir string, st map[string]ServerStatus) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.empty) >= maxRemembered {
		clear(v.empty)
	}
	if len(v.integration) >= maxRemembered {
		clear(v.integration)
	}
	if len(st) == 0 {
		v.empty[dir] = true
	} else {
		delete(v.empty, dir)
	}
	var remote map[string]bool
	for name, s := range st {
		if s.IntegrationID != "" {
			if remote == nil {
				remote = map[string]bool{}
			}
			remote[name] = true
		}
	}
	if remote == nil {
		delete(v.integration, dir)
	} else {
		v.integration[dir] = remote
	}
}

func (v *ClientV2) readStatus(ctx context.Context, dir string) (map[string]ServerStatus, error) {
	body, _, err := v.getCap(ctx, CapStatus, opMCPStatusV2, locQuery(dir))
	if err != nil {
		return nil, err
	}
	loc, st, err := ParseStatusV2(body)
	if err != nil {
		return nil, v.unexpected(opMCPStatusV2, err)
	}
	// A server that did not understand location[directory] answers for
	// its own working directory: those are not dir's servers, and acting
	// on them would connect servers in $HOME. Fail loudly instead.
	if loc != "" && path.Clean(loc) != path.Clean(dir) {
		return nil, v.unexpected(opMCPStatusV2, fmt.Errorf("answered for location %q, not %q: the server ignored location[directory]", loc, dir))
	}
	return st, nil
}

// Connect asks OpenCode to (re)connect one MCP server in dir: 2.x stops and
// starts it whatever its status, and answers 204 when the attempt is over,
// whether or not the server came up: read MCPStatus for the outcome. An
// unknown name gives ErrNotFound.
//
// The route is the one the server's description offers: 2.0.21 is
// documented with POST /api/experimental/mcp/{name}/connect, the v2
// preview build has only /api/mcp/{name}/connect. Without a description
// both are candidates, in that order. A 405, or a 404 that is not
// OpenCode's own McpServerNotFoundError, means the route does not exist:
// the next candidate is tried, and the missing one again only after its
// backoff step.
func (v *ClientV2) Connect(ctx context.Context, dir, name string) error {
	if name == "." || name == ".." {
		// URL parsers (OpenCode's too) resolve these segments, escaped
		// or not: the request would reach another route.
		return &Error{Op: "POST " + routeConnectExp, URL: v.URL(), Detail: fmt.Sprintf("server name %q cannot be sent in a URL path", name), kind: ErrUnavailable}
	}
	_, _, _, err := v.call(ctx, CapConnect, "POST "+routeConnectExp, v.c.long, DefaultConnectTimeout, name, locQuery(dir), func(op string, status int, body []byte) error {
		if status == http.StatusNotFound && errorTag(body) != tagMCPNotFound {
			// The route exists but something else is missing (the
			// location's directory): not "no such server", which would
			// make the engine forget it.
			return &Error{Op: op, URL: v.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
		}
		return v.c.classifyV2(op, status, body)
	})
	return err
}

// MCPConfig reads the MCP servers configured for dir: GET /api/config
// where the server offers it. Where it does not (the v2 preview build),
// the servers come from the config files OpenCode reads, when it runs on
// this machine (see ReadMCPConfig), and every server the last status read
// of dir marked with an integrationID is remote. Remote headers and local
// environments are never decoded (they may hold secrets).
func (v *ClientV2) MCPConfig(ctx context.Context, dir string) (map[string]MCPEntry, error) {
	body, gone, err := v.getCap(ctx, CapConfig, opConfigV2, locQuery(dir))
	if gone {
		return v.configWithoutRoute(dir), nil
	}
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfigV2(body)
	if err != nil {
		return nil, v.unexpected(opConfigV2, err)
	}
	return cfg, nil
}

// configWithoutRoute is MCPConfig for a server without GET /api/config:
// the config files as this OpenCode process resolves them (its own
// environment and home, told by the daemon's process view: SetConfigEnv);
// until the view has found the process, those of this machine when the
// server listens on loopback, unless the process it replaced was found in
// another mount namespace (a container that restarted): then none until
// the view decides about this one. A process in another mount namespace
// (a container published on loopback) or on another machine has none
// readable here: only what its status reads said is known.
func (v *ClientV2) configWithoutRoute(dir string) map[string]MCPEntry {
	env := OwnConfigEnv(V2)
	if e := v.mem.config.Load(); e != nil {
		env = *e
	} else if !v.local || v.mem.foreign.Load() {
		env = ConfigEnv{}
	}
	cfg, err := ReadMCPConfig(dir, env)
	if err != nil {
		cfg = map[string]MCPEntry{}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for name := range v.integration[dir] {
		if e := cfg[name]; e.Type != "remote" {
			cfg[name] = MCPEntry{Type: "remote", Enabled: e.Enabled}
		}
	}
	return cfg
}

// Info reads the server's version and pid from the route its description
// offers: GET /api/info (2.0.6 on), /api/health (the v2 preview build) or
// /api/status (2.0.0–2.0.5). It boots no location.
func (v *ClientV2) Info(ctx context.Context) (Info, error) {
	p, body, _, err := v.call(ctx, CapVersion, opInfoV2, v.c.http, v.c.timeout, "", "", v.c.classifyV2)
	if err != nil {
		return Info{}, err
	}
	var info Info
	switch p {
	case routeHealthV2:
		info, err = ParseHealthV2(body)
	case routeStatusOld:
		info, err = parseStatusOld(body)
	default:
		info, err = ParseInfo(body)
	}
	if err != nil {
		return Info{}, v.unexpected("GET "+p, err)
	}
	return info, nil
}

// Doc reads GET /openapi.json, the server's OpenAPI description.
func (v *ClientV2) Doc(ctx context.Context) ([]byte, error) {
	return v.get(ctx, opDocV2, "/openapi.json", "")
}

// LocationListed reports whether dir is among the booted locations locs,
// compared as cleaned paths (a trailing slash is the same location).
func LocationListed(locs []string, dir string) bool {
	want := path.Clean(dir)
	return slices.ContainsFunc(locs, func(l string) bool { return path.Clean(l) == want })
}

// BootedLocations lists the directories of the booted locations, without
// booting any (GET /api/debug/location). known is false when the server
// offers no such list. While its description cannot be read, whether it
// offers one is not known yet: then the route is asked only if it answered
// this process before, and otherwise the error matches ErrNotYet, with
// the time until the description is read again (a check must not act as
// if the server had no list: it would boot disposed locations again) --
// for descriptionPatience failed reads; after them known is false, said
// once in the log and in Capabilities.
func (v *ClientV2) BootedLocations(ctx context.Context) (dirs []string, known bool, err error) {
	const op = "GET " + routeLocations
	var body []byte
	gone := false
	if rs := v.routes(ctx); !rs.provisional {
		body, gone, err = v.getCap(ctx, CapLocations, op, "")
	} else if v.mem.has(op) {
		body, err = v.get(ctx, op, routeLocations, "")
	} else if v.patienceOver() {
		return nil, false, nil
	} else {
		v.mem.desc.mu.Lock()
		in := max(time.Until(v.mem.desc.retry.again), time.Second)
		v.mem.desc.mu.Unlock()
		return nil, true, &Error{Op: op, URL: v.URL(), Detail: "whether this OpenCode 2 lists its booted locations is not known until its API description is read (" + rs.docNote + ")",
			kind: ErrNotYet, RetryAfter: in}
	}
	if gone {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	dirs, err = ParseLocationsV2(body)
	if err != nil {
		return nil, true, v.unexpected(op, err)
	}
	return dirs, true, nil
}
