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
)

// The 2.x client and its calls: ClientV2, the engine's MCPStatus, Connect
// and MCPConfig, and Info, Doc and BootedLocations. How it sends and sorts
// a request is in v2transport.go, the parsers of the answers in v2parse.go,
// the routes in routes2.go and the event stream in v2events.go.

// ClientV2 talks to one OpenCode 2.x server (see
// docs/opencode.md#the-2x-surface-and-its-authentication). It offers the request/response
// routes the engine uses with the same methods and types as the 1.x Client,
// so the engine cannot tell which generation it talks to. It shares the 1.x
// client's error type, timeouts, body limit, redirect policy and basic auth.
//
// One ClientV2 is one detection: it uses 2.1.2's routes (routes2.go); a
// route that answers 404 without an OpenCode error tag is asked again only
// after a backoff step, and the next detection asks it again. What
// outlives a detection is the sessions' directories, which a Server keeps
// for as long as the same OpenCode process answers.
type ClientV2 struct {
	c *Client
	// sessions are the directories of the sessions seen on the event
	// stream: the OpenCode process's, shared by its detections.
	sessions *sessionDirs

	log *slog.Logger
	mu  sync.Mutex
	// missing holds the "METHOD path" routes that answered 404 (without
	// an OpenCode error tag) or 405, each asked again after its backoff.
	missing map[string]*retry
	// empty holds the directories whose last status read listed no server.
	empty map[string]bool
}

// NewV2 returns a 2.x client for the server at rawURL. OpenCode 2.x always
// authenticates as user "opencode": leave Options.Username empty.
func NewV2(rawURL string, o Options) (*ClientV2, error) {
	return newV2(rawURL, o, newSessionDirs(maxSessions), slog.New(slog.DiscardHandler))
}

// newV2 is NewV2 with the sessions of the process behind rawURL and where
// to warn of a route that is missing.
func newV2(rawURL string, o Options, sessions *sessionDirs, log *slog.Logger) (*ClientV2, error) {
	c, err := New(rawURL, o)
	if err != nil {
		return nil, err
	}
	c.hint = hintV2
	return &ClientV2{c: c, sessions: sessions, log: log, missing: map[string]*retry{}, empty: map[string]bool{}}, nil
}

// URL is the server's base URL, safe to log.
func (v *ClientV2) URL() string { return v.c.URL() }

// The operations of the calls, as errors and logs name them.
const (
	opMCPStatusV2 = "GET /api/mcp"
	opDocV2       = "GET /openapi.json"
)

// EmptyRereadDelay is how long MCPStatus waits before it reads again an
// answer that lists no server: right after a boot an empty list may not be
// final (docs/opencode.md#mcp-status-and-pending-2x).
const EmptyRereadDelay = 500 * time.Millisecond

// maxRemembered bounds the directories whose last read was empty that a
// client remembers.
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
func (v *ClientV2) MCPStatus(ctx context.Context, dir string) (map[string]MCPServerStatus, error) {
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
	// Whether dir's read was empty, remembered.
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.empty) >= maxRemembered {
		clear(v.empty)
	}
	if len(st) == 0 {
		v.empty[dir] = true
	} else {
		delete(v.empty, dir)
	}
	return st, nil
}

func (v *ClientV2) readStatus(ctx context.Context, dir string) (map[string]MCPServerStatus, error) {
	var st map[string]MCPServerStatus
	_, err := v.getCap(ctx, CapStatus, locQuery(dir), func(body []byte) error {
		loc, s, err := ParseStatusV2(body)
		// A server that did not understand location[directory] answers
		// for its own working directory: those are not dir's servers, and
		// acting on them would connect servers in $HOME. Fail loudly.
		if err == nil && loc != "" && path.Clean(loc) != path.Clean(dir) {
			err = fmt.Errorf("answered for location %q, not %q: the server ignored location[directory]", loc, dir)
		}
		st = s
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Connect asks OpenCode to (re)connect one MCP server in dir: 2.x stops and
// starts it whatever its status, and answers 204 when the attempt is over,
// whether or not the server came up: read MCPStatus for the outcome. An
// unknown name gives ErrNotFound.
//
// A 405, or a 404 that is not OpenCode's own McpServerNotFoundError,
// means the route does not exist: it is asked again only after its
// backoff step.
func (v *ClientV2) Connect(ctx context.Context, dir, name string) error {
	if name == "." || name == ".." {
		// URL parsers (OpenCode's too) resolve these segments, escaped
		// or not: the request would reach another route.
		return &Error{Op: "POST /api/experimental/mcp/{name}/connect", URL: v.URL(), Detail: fmt.Sprintf("server name %q cannot be sent in a URL path", name), kind: ErrUnavailable}
	}
	_, _, err := v.call(ctx, CapConnect, v.c.long, DefaultConnectTimeout, name, locQuery(dir), func(op string, status int, body []byte) error {
		if status == http.StatusNotFound && errorTag(body) != tagMCPNotFound {
			// The route exists but something else is missing (the
			// location's directory): not "no such server", which would
			// make the engine forget it.
			return &Error{Op: op, URL: v.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
		}
		return v.c.classify(op, status, body)
	})
	return err
}

// MCPConfig reads the MCP servers configured for dir: GET /api/config.
// A server without the route has no config the daemon can read (it never
// guesses one from files): the error says so, and the engine runs with
// the server kinds unknown. Remote headers and local environments are
// never decoded (they may hold secrets).
func (v *ClientV2) MCPConfig(ctx context.Context, dir string) (map[string]MCPEntry, error) {
	var cfg map[string]MCPEntry
	_, err := v.getCap(ctx, CapConfig, locQuery(dir), func(body []byte) (err error) {
		cfg, err = ParseConfigV2(body)
		return err
	})
	return cfg, err
}

// Info reads the server's version and pid (GET /api/info). It boots no
// location.
func (v *ClientV2) Info(ctx context.Context) (Info, error) {
	var info Info
	_, err := v.getCap(ctx, CapVersion, "", func(body []byte) (err error) {
		info, err = ParseInfo(body)
		return err
	})
	return info, err
}

// Doc reads GET /openapi.json, the server's OpenAPI description.
func (v *ClientV2) Doc(ctx context.Context) ([]byte, error) {
	return v.c.do(ctx, v.c.http, v.c.timeout, opDocV2, "GET", "/openapi.json", "", nil)
}

// LocationListed reports whether dir is among the booted locations locs,
// compared as cleaned paths (a trailing slash is the same location).
func LocationListed(locs []string, dir string) bool {
	want := path.Clean(dir)
	return slices.ContainsFunc(locs, func(l string) bool { return path.Clean(l) == want })
}

// BootedLocations lists the directories of the booted locations, without
// booting any (GET /api/debug/location). known is false when the server
// has no such list.
func (v *ClientV2) BootedLocations(ctx context.Context) (dirs []string, known bool, err error) {
	gone, err := v.getCap(ctx, CapLocations, "", func(body []byte) (err error) {
		dirs, err = ParseLocationsV2(body)
		return err
	})
	if gone {
		return nil, false, nil
	}
	return dirs, true, err
}
