package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
)

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

// retry is the backoff of something that failed: how often in a row, and
// when to try it again.
type retry struct {
	n     int
	again time.Time
}

// retryPolicy spaces the reads of a description that failed, and the
// requests of a route that answered as missing: 1 s, doubling to a minute.
var retryPolicy = backoff.Policy{Initial: time.Second, Max: time.Minute, Jitter: 0.2}

// fail counts one more failure and sets when to try again: the next
// backoff step, and no sooner than after (a server's Retry-After).
func (r *retry) fail(now time.Time, after time.Duration) time.Duration {
	r.n++
	d := max(retryPolicy.Jittered(retryPolicy.Base(r.n)), after)
	r.again = now.Add(d)
	return d
}

// processMemory is what the daemon learns of one OpenCode 2 process and
// keeps across its detections (every re-subscribe of the event stream
// detects again): the directory of each session seen on the stream (2.x
// sends session.execution.* without a location), and the routes that
// answered. A Server forgets it when another process answers.
type processMemory struct {
	desc     description
	sessions *sessionDirs
	answered sync.Map // "METHOD path" → true
	// config is how the process resolves its config files (its own
	// environment and home; Local false when they are not this
	// machine's), as the daemon's process view found it; nil until then.
	config atomic.Pointer[ConfigEnv]
	// foreign is set when the process replaced last was found not to
	// see this machine's files: until the view decides about the one
	// that answers now, it is taken for the same (a container that
	// restarted keeps its port and its namespace), and this machine's
	// files are not applied to it.
	foreign atomic.Bool
}

// description is what the reads of one process's API description gave,
// shared by the clients of its detections.
type description struct {
	// read serialises the reads.
	read sync.Mutex

	mu sync.Mutex
	// gen counts the forgets: a read begun before one is another
	// process's, and is not kept.
	gen int
	rs  *routeSet // nil before the first read
	// doc and err are that read's outcome; retry the backoff of the
	// reads that failed, told whether the failure was logged.
	doc   *apidesc.Doc
	err   error
	retry retry
	told  bool
	// patienceTold: the checks that wait for it were told to wait no
	// longer (descriptionPatience), and the log said so.
	patienceTold bool
}

// descriptionPatience is how many failed reads of the description (about
// 30 s of them: 1 s doubling) the checks that need the booted locations
// wait for. After them the checks go on as without a description (as on
// 2.0.21, which lists no booted location): a description that never
// answers must not hold every repair of the directories OpenCode armed for
// as long as the process runs. The reads go on with backoff, and the list
// is used again once it answers.
const descriptionPatience = 5

func newProcessMemory() *processMemory { return &processMemory{sessions: newSessionDirs(maxSessions)} }

// forget empties the memory: OpenCode was replaced, and the description,
// sessions and routes of another process mean nothing.
func (m *processMemory) forget() {
	d := &m.desc
	d.mu.Lock()
	d.gen++
	d.rs, d.doc, d.err, d.retry, d.told, d.patienceTold = nil, nil, nil, retry{}, false, false
	d.mu.Unlock()
	m.sessions.forget()
	m.answered.Clear()
	if prev := m.config.Swap(nil); prev != nil {
		m.foreign.Store(!prev.Local)
	}
}

// has reports whether route answered this process.
func (m *processMemory) has(route string) bool {
	_, ok := m.answered.Load(route)
	return ok
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

// The 2.x error tags the client tells apart ({"_tag": …} error bodies).
const (
	tagUnauthorized     = "UnauthorizedError"
	tagMCPNotFound      = "McpServerNotFoundError"
	tagLocationDenied   = "LocationPermissionDeniedError"
	locationParam       = "location[directory]"
	opMCPStatusV2       = "GET /api/mcp"
	opConfigV2          = "GET /api/config"
	opInfoV2            = "GET /api/info"
	opDocV2             = "GET /openapi.json"
	routeConnectExp     = "/api/experimental/mcp/{name}/connect"
	routeConnectDev     = "/api/mcp/{name}/connect"
	maxErrorTagBodySize = 64 << 10
)

// locQuery selects dir's location. 2.x ignores ?directory= and would answer
// for its own working directory ($HOME for the shared service) instead.
func locQuery(dir string) url.Values { return url.Values{locationParam: {dir}} }

// errorTag returns the "_tag" of a 2.x error body, or "".
func errorTag(body []byte) string {
	if len(body) > maxErrorTagBodySize {
		return ""
	}
	var e struct {
		Tag string `json:"_tag"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Tag
}

// hintV2 is the fix for a password OpenCode 2 refused: it authenticates as
// "opencode" with OPENCODE_PASSWORD (or OPENCODE_SERVER_PASSWORD), or the
// background service's generated password.
const hintV2 = "OpenCode 2 takes the password from OPENCODE_PASSWORD, else OPENCODE_SERVER_PASSWORD, else its service.json: run mcp-reconnect without --url and --password to follow the background service, or set --password"

// classifyV2 sorts a 2.x answer into nil (2xx) or an *Error.
func (c *Client) classifyV2(op string, status int, body []byte) error {
	switch {
	case status >= 200 && status <= 299:
		return nil
	case status == http.StatusUnauthorized:
		return &Error{Op: op, URL: c.URL(), Status: status, kind: ErrUnauthorized, hint: hintV2}
	case status == http.StatusForbidden && errorTag(body) == tagLocationDenied:
		// 2.x's 403 is about the directory (OpenCode may not read it), not
		// the credentials: telling the user to fix the password would
		// send them the wrong way.
		return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
	case status == http.StatusForbidden:
		return &Error{Op: op, URL: c.URL(), Status: status, kind: ErrUnauthorized, hint: hintV2}
	case status == http.StatusNotFound:
		return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrNotFound}
	}
	return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
}

// descriptionTimeout bounds a read of GET /openapi.json (about 300 KB on
// the preview build).
const descriptionTimeout = 5 * time.Second

// routes returns the route choices, reading the server's description at
// the first call for its process, and again once its backoff allows while
// the reads fail. Concurrent first calls wait for the one read; later ones
// use the defaults meanwhile. A read does not end with the caller's
// context (every later call depends on it), only with its own timeout.
func (v *ClientV2) routes(ctx context.Context) *routeSet {
	d := &v.mem.desc
	current := func() (*routeSet, bool, int) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.rs, d.rs == nil || d.rs.provisional && !time.Now().Before(d.retry.again), d.gen
	}
	rs, due, _ := current()
	switch {
	case !due:
		return rs
	case rs == nil:
		d.read.Lock()
	case !d.read.TryLock():
		return rs // being read again
	}
	defer d.read.Unlock()
	rs, due, gen := current()
	if !due {
		return rs
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(descriptionTimeout, v.c.timeout))
	defer cancel()
	body, err := v.Doc(rctx)
	var desc *apidesc.Doc
	if err == nil {
		desc, err = apidesc.Parse(body)
	}
	use, note, transient := desc, "", false
	var e *Error
	switch {
	case errors.As(err, &e) && e.Status == 0:
		transient, note = true, "GET /openapi.json failed: "+e.Detail // a timeout, a reset
	case errors.As(err, &e) && e.Status >= 200 && e.Status <= 299:
		// The answer began but its body could not be had (the
		// connection dropped mid-body): not the server's final word.
		transient, note = true, "GET /openapi.json was cut short: "+e.Detail
	case errors.Is(err, apidesc.ErrCutShort):
		// A body that ends inside its JSON was cut short where nothing
		// told its length (a close-delimited answer): read it again,
		// as after a 503. (One that is no JSON at all, a web UI's
		// page, is an answer: no description.)
		transient, note = true, "GET /openapi.json was cut short: "+err.Error()
	case errors.As(err, &e):
		// A busy or starting server (5xx, 429, 408) has a description
		// still to come; a 404 or 405 says it has none, and a refused
		// password fails every call (the next detection asks again).
		transient = e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
		note = fmt.Sprintf("GET /openapi.json answered %d", e.Status)
	case err != nil:
		note = "GET /openapi.json is unreadable: " + err.Error()
	case !offersAPI(desc):
		use, note = nil, "GET /openapi.json is unreadable: lists no /api/ route: not an OpenCode 2 description"
	}
	rs = chooseRoutes(use, note, transient)
	d.mu.Lock()
	if d.gen != gen {
		// Another process answers now: this read was the old one's.
		d.mu.Unlock()
		return rs
	}
	d.rs, d.doc, d.err = rs, desc, err
	warn := false
	if transient {
		after, _ := RetryAfter(err)
		in := d.retry.fail(time.Now(), after)
		warn, d.told = !d.told, true
		note += fmt.Sprintf("; asked again in %s", in.Round(time.Millisecond))
	}
	d.mu.Unlock()
	if warn {
		v.logger().Warn("OpenCode 2 API description unreadable; using the default routes, and checks that need the booted locations wait, until it answers",
			"url", v.URL(), "why", note)
	}
	if !transient {
		v.logCapabilities(rs)
	}
	return rs
}

// offersAPI reports whether a description lists a route under /api/, as
// OpenCode 2's do.
func offersAPI(d *apidesc.Doc) bool {
	for _, p := range d.Paths() {
		if strings.HasPrefix(p, "/api/") {
			return true
		}
	}
	return false
}

// Description returns the server's API description as the client read it
// (reading it first if no call did yet), or why there is none.
func (v *ClientV2) Description(ctx context.Context) (*apidesc.Doc, error) {
	v.routes(ctx)
	d := &v.mem.desc
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.doc, d.err
}

// logCapabilities says, once per answer of the description, which route
// each capability uses, and what the daemon runs without.
func (v *ClientV2) logCapabilities(rs *routeSet) {
	attrs := []any{"url", v.URL()}
	if rs.doc != nil {
		attrs = append(attrs, "description", fmt.Sprintf("%d paths", len(rs.doc.Paths())))
	} else {
		attrs = append(attrs, "description", "none: "+rs.docNote+"; using the defaults")
	}
	var without []string
	for _, c := range v.capabilities(rs) {
		if c.Available() {
			attrs = append(attrs, c.Name, c.Route)
		} else {
			attrs = append(attrs, c.Name, "none ("+c.Missing+")")
			without = append(without, c.Name)
		}
	}
	if len(without) > 0 {
		attrs = append(attrs, "running_without", strings.Join(without, ","))
	}
	v.logger().Info("OpenCode 2 routes", attrs...)
}

// Capabilities reports, for each thing the daemon uses, the route this
// server offers for it, or why it has none (reading the server's API
// description first if no call did yet). It never reads it again: status
// asks it, and must not wait for a description being retried.
func (v *ClientV2) Capabilities(ctx context.Context) []Capability {
	v.mem.desc.mu.Lock()
	rs := v.mem.desc.rs
	v.mem.desc.mu.Unlock()
	if rs == nil {
		rs = v.routes(ctx)
	}
	return v.capabilities(rs)
}

func (v *ClientV2) capabilities(rs *routeSet) []Capability {
	v.mem.desc.mu.Lock()
	impatient := v.mem.desc.retry.n >= descriptionPatience
	v.mem.desc.mu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	out := make([]Capability, 0, len(rs.choices))
	for _, c := range rs.choices {
		cp := Capability{Name: c.name, FromDescription: c.fromDoc, Missing: c.missing, Without: c.without}
		if c.name == CapLocations && rs.provisional && v.mem.has("GET "+routeLocations) {
			cp.Route, cp.Missing, cp.Without = "GET "+routeLocations, "", "" // it answered before
		} else if c.name == CapLocations && rs.provisional && impatient {
			cp.Without = fmt.Sprintf("checks of directories OpenCode armed waited for it %d reads and now go on without it: a disposed location cannot be told from a booted one without booting it", descriptionPatience)
		}
		var gone []string
		for _, p := range c.paths {
			if r := v.missing[c.method+" "+p]; r != nil && now.Before(r.again) {
				gone = append(gone, fmt.Sprintf("%s %s (asked again in %s)", c.method, p, r.again.Sub(now).Round(time.Millisecond)))
				continue
			}
			cp.Route = c.method + " " + p
			break
		}
		if cp.Route != "" {
			cp.Missing, cp.Without = "", ""
		} else if len(gone) > 0 {
			cp.Missing = strings.Join(gone, " and ") + " answered 404 (no such route)"
			cp.Without = withoutCap[c.name]
		}
		out = append(out, cp)
	}
	return out
}

// capability is one capability's state.
func (v *ClientV2) capability(ctx context.Context, name string) Capability {
	for _, c := range v.Capabilities(ctx) {
		if c.Name == name {
			return c
		}
	}
	return Capability{Name: name, Missing: "unknown capability"}
}

// usable returns the candidates of a capability that are not waiting out
// the backoff of a 404, best first.
func (v *ClientV2) usable(ctx context.Context, name string) (method string, paths []string) {
	c := v.routes(ctx).get(name)
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	for _, p := range c.paths {
		if r := v.missing[c.method+" "+p]; r == nil || !now.Before(r.again) {
			paths = append(paths, p)
		}
	}
	return c.method, paths
}

// routeMissing reports an answer that says the route does not exist: 405,
// or a 404 that is not one of OpenCode's own errors (those carry a _tag:
// McpServerNotFoundError, LocationNotFoundError).
func routeMissing(status int, body []byte) bool {
	return status == http.StatusMethodNotAllowed || status == http.StatusNotFound && errorTag(body) == ""
}

// drop leaves a route that answered as missing alone for its next backoff
// step, and says so the first time.
func (v *ClientV2) drop(capName, method, p string, status int) {
	key := method + " " + p
	v.mu.Lock()
	r := v.missing[key]
	if r == nil {
		r = &retry{}
		v.missing[key] = r
	}
	in := r.fail(time.Now(), 0)
	first, log := r.n == 1, v.log
	v.mu.Unlock()
	if first {
		log.Warn("OpenCode 2 route does not exist; asked again with backoff", "url", v.URL(), "capability", capName, "route", key, "status", status, "retry_in", in.Round(time.Millisecond))
	}
}

// found notes that a route answered 2xx: its backoff ends, and the
// process's memory keeps it. (Not any answer: a starting OpenCode 2
// answers 503 to every route, the ones it lacks too.)
func (v *ClientV2) found(method, p string) {
	key := method + " " + p
	v.mu.Lock()
	delete(v.missing, key)
	v.mu.Unlock()
	v.mem.answered.Store(key, true)
}

// errNoRoute is the error of a call whose capability the server lacks.
func (v *ClientV2) errNoRoute(ctx context.Context, op, name string) error {
	c := v.capability(ctx, name)
	return &Error{Op: op, URL: v.URL(), Detail: "this OpenCode 2 has no route for it: " + c.Missing + "; " + c.Without, kind: ErrUnavailable}
}

// send is one request of a capability's route.
func (v *ClientV2) send(ctx context.Context, hc *http.Client, timeout time.Duration, op, method, escPath string, query url.Values) (int, []byte, error) {
	return v.c.send(ctx, hc, timeout, op, method, escPath, query, nil)
}

// get is a GET of a 2.x JSON route; it returns the 2xx body.
func (v *ClientV2) get(ctx context.Context, op, escPath string, query url.Values) ([]byte, error) {
	status, body, err := v.send(ctx, v.c.http, v.c.timeout, op, "GET", escPath, query)
	if err != nil {
		return nil, err
	}
	if err := v.c.classifyV2(op, status, body); err != nil {
		return nil, err
	}
	return body, nil
}

// getCap is a GET of the route of a single-route capability. gone is true
// when the server has no such route (now or since an earlier 404).
func (v *ClientV2) getCap(ctx context.Context, name, op string, query url.Values) (body []byte, gone bool, err error) {
	method, paths := v.usable(ctx, name)
	if len(paths) == 0 {
		return nil, true, v.errNoRoute(ctx, op, name)
	}
	status, body, err := v.send(ctx, v.c.http, v.c.timeout, op, method, paths[0], query)
	if err != nil {
		return nil, false, err
	}
	if routeMissing(status, body) {
		v.drop(name, method, paths[0], status)
		return nil, true, v.errNoRoute(ctx, op, name)
	}
	if err := v.c.classifyV2(op, status, body); err != nil {
		return nil, false, err
	}
	v.found(method, paths[0])
	return body, false, nil
}

// unexpected is the error for a 2xx answer that is not the expected JSON.
func (v *ClientV2) unexpected(op string, err error) error {
	return &Error{Op: op, URL: v.URL(), Status: http.StatusOK, Detail: err.Error(), kind: ErrUnavailable}
}

// EmptyRereadDelay is how long MCPStatus waits before it reads again an
// answer that lists no server: right after a boot an empty list may not be
// final (docs/opencode.md#what-is-unknown-for-2021-and-how-the-daemon-degrades).
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
			t := time.NewTimer(EmptyRereadDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, &Error{Op: opMCPStatusV2, URL: v.URL(), Detail: ctx.Err().Error(), kind: ErrUnavailable, cause: ctx.Err()}
			case <-t.C:
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

// ParseStatusV2 decodes the body of 2.x GET /api/mcp:
// {"location":{"directory":D,…},"data":[{"name":N,"status":{"status":S,"error"?:E},"integrationID"?:I},…]}.
// It returns the location's directory ("" when the answer names none) and
// the servers. Anything but that shape is an error: an answer that cannot
// be understood must never read as "no servers". An integrationID that is
// not a string is ignored.
func ParseStatusV2(body []byte) (location string, servers map[string]ServerStatus, err error) {
	var raw struct {
		Location *struct {
			Directory json.RawMessage `json:"directory"`
		} `json:"location"`
		Data *[]*struct {
			Name   *string `json:"name"`
			Status *struct {
				Status *string         `json:"status"`
				Error  json.RawMessage `json:"error"`
			} `json:"status"`
			IntegrationID json.RawMessage `json:"integrationID"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return "", nil, fmt.Errorf("status is not {\"location\",\"data\":[…]}: %w", err)
	}
	if raw.Data == nil || *raw.Data == nil {
		return "", nil, errors.New("status has no \"data\" array")
	}
	if raw.Location != nil && len(raw.Location.Directory) > 0 {
		if json.Unmarshal(raw.Location.Directory, &location) != nil {
			return "", nil, errors.New("status location.directory is not a string")
		}
	}
	out := make(map[string]ServerStatus, len(*raw.Data))
	for i, item := range *raw.Data {
		if item == nil || item.Name == nil {
			return "", nil, fmt.Errorf("status entry %d has no string \"name\"", i)
		}
		if item.Status == nil || item.Status.Status == nil {
			return "", nil, fmt.Errorf("status of server %q has no string \"status.status\"", *item.Name)
		}
		st := ServerStatus{Status: *item.Status.Status}
		if e := item.Status.Error; len(e) > 0 && string(e) != "null" {
			if json.Unmarshal(e, &st.Error) != nil {
				st.Error = string(e) // not a string: keep it readable
			}
		}
		_ = json.Unmarshal(item.IntegrationID, &st.IntegrationID)
		st.RateLimited = st.Status == StatusFailed && rateLimited(st.Error)
		out[*item.Name] = st
	}
	return location, out, nil
}

// rateLimited reports whether a failed server's error says its endpoint
// answered 429. OpenCode 2 (packages/core/src/mcp/cooldown.ts and
// client.ts, read at 12d1b536) shares a cooldown per endpoint across all its
// connections once a remote MCP server answers 429, for the Retry-After
// the server sent (1 s without one), and answers every request within it
// with a 429 of its own, "MCP endpoint cooldown after HTTP 429", without
// asking the server. A client sees only the status entry: connect still
// answers 204, the entry is failed with the error "Error POSTing to
// endpoint: <the server's body> (HTTP 429)" or "Error POSTing to
// endpoint: MCP endpoint cooldown after HTTP 429", and no field, header
// or event carries the Retry-After. Builds before it (2.0.21, on the 1.x
// MCP SDK) name no status in that error.
//
// The body is the MCP server's own text, so only those exact forms count:
// the prefix, and the status OpenCode writes at the very end (or its
// cooldown's whole message). "HTTP 429" anywhere else, in a body that
// ends in another status or in a JSON-RPC error of the server, is the
// server's word, not a rate limit. (Only remote servers speak HTTP: the
// engine asks it of those alone.)
func rateLimited(errText string) bool {
	rest, ok := strings.CutPrefix(errText, rateLimitPrefix)
	return ok && (strings.HasSuffix(rest, rateLimitSuffix) || rest == rateLimitCooldown)
}

// The parts of OpenCode 2's errors for a remote endpoint's 429.
const (
	rateLimitPrefix   = "Error POSTing to endpoint: "
	rateLimitSuffix   = " (HTTP 429)"
	rateLimitCooldown = "MCP endpoint cooldown after HTTP 429"
)

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
	method, paths := v.usable(ctx, CapConnect)
	if len(paths) == 0 {
		return v.errNoRoute(ctx, "POST "+routeConnectExp, CapConnect)
	}
	for _, p := range paths {
		op := method + " " + p
		esc := strings.Replace(apidesc.Template(p), "{}", url.PathEscape(name), 1)
		status, body, err := v.send(ctx, v.c.long, v.c.connectTimeout, op, method, esc, locQuery(dir))
		if err != nil {
			return err
		}
		if routeMissing(status, body) {
			v.drop(CapConnect, method, p, status)
			continue
		}
		if status == http.StatusNotFound && errorTag(body) != tagMCPNotFound {
			// The route exists but something else is missing (the
			// location's directory): not "no such server", which would
			// make the engine forget it.
			return &Error{Op: op, URL: v.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
		}
		if err := v.c.classifyV2(op, status, body); err != nil {
			return err
		}
		v.found(method, p)
		return nil
	}
	return v.errNoRoute(ctx, method+" "+paths[0], CapConnect)
}

// MCPConfig reads the MCP servers configured for dir: GET /api/config
// where the server offers it. Where it does not (the v2 preview build),
// the servers come from the config files OpenCode reads, when it runs on
// this machine (see LocalMCPConfig), and every server the last status read
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

// ParseConfigV2 decodes the body of 2.x GET /api/config: a bare array of
// config layers, lowest priority first. Only "document" layers carry
// settings; a server named again in a later layer replaces the earlier one
// whole. "disabled":true reads as Enabled=false. A top level that is not an
// array is an error; a layer or server of an unexpected shape is skipped
// or read as far as it makes sense, never fatal.
func ParseConfigV2(body []byte) (map[string]MCPEntry, error) {
	var layers []json.RawMessage
	if err := json.Unmarshal(body, &layers); err != nil {
		return nil, fmt.Errorf("config is not a JSON array of layers: %w", err)
	}
	if layers == nil {
		return nil, errors.New("config is null, not a JSON array of layers")
	}
	out := map[string]MCPEntry{}
	for _, l := range layers {
		var layer struct {
			Type string `json:"type"`
			Info struct {
				MCP struct {
					Servers map[string]json.RawMessage `json:"servers"`
				} `json:"mcp"`
			} `json:"info"`
		}
		if json.Unmarshal(l, &layer) != nil || layer.Type != "document" {
			continue
		}
		for name, raw := range layer.Info.MCP.Servers {
			out[name] = configEntryV2(raw)
		}
	}
	return out, nil
}

// configEntryV2 reads one server of a config layer, field by field so that
// one odd field costs only itself: type, url, command, cwd, and 2.x's
// "disabled" or 1.x's "enabled". Headers and environment are not among the
// fields (they may hold secrets).
func configEntryV2(raw json.RawMessage) MCPEntry {
	var f struct {
		Type     json.RawMessage `json:"type"`
		URL      json.RawMessage `json:"url"`
		Disabled json.RawMessage `json:"disabled"`
		Enabled  json.RawMessage `json:"enabled"`
		Command  json.RawMessage `json:"command"`
		Cwd      json.RawMessage `json:"cwd"`
	}
	var e MCPEntry
	if json.Unmarshal(raw, &f) != nil {
		return e
	}
	_ = json.Unmarshal(f.Type, &e.Type)
	_ = json.Unmarshal(f.URL, &e.URL)
	_ = json.Unmarshal(f.Cwd, &e.Cwd)
	var cmd []string
	if json.Unmarshal(f.Command, &cmd) == nil && len(cmd) > 0 {
		e.Command = cmd
	}
	var disabled, enabled bool
	switch {
	case json.Unmarshal(f.Disabled, &disabled) == nil:
		enabled = !disabled
		e.Enabled = &enabled
	case json.Unmarshal(f.Enabled, &enabled) == nil:
		e.Enabled = &enabled
	}
	return e
}

// Info is the answer of 2.x GET /api/info (or /api/health, /api/status).
type Info struct {
	// Version is OpenCode's version, e.g. "2.0.21".
	Version string
	// PID is the server's process id (0 when the route reports none).
	PID int
	// URLs are the addresses the server listens on.
	URLs []string
}

// Info reads the server's version and pid from the route its description
// offers: GET /api/info (2.0.6 on), /api/health (the v2 preview build) or
// /api/status (2.0.0–2.0.5). It boots no location.
func (v *ClientV2) Info(ctx context.Context) (Info, error) {
	method, paths := v.usable(ctx, CapVersion)
	for _, p := range paths {
		op := method + " " + p
		status, body, err := v.send(ctx, v.c.http, v.c.timeout, op, method, p, nil)
		if err != nil {
			return Info{}, err
		}
		if routeMissing(status, body) {
			v.drop(CapVersion, method, p, status)
			continue
		}
		if err := v.c.classifyV2(op, status, body); err != nil {
			return Info{}, err
		}
		v.found(method, p)
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
			return Info{}, v.unexpected(op, err)
		}
		return info, nil
	}
	return Info{}, v.errNoRoute(ctx, opInfoV2, CapVersion)
}

// ParseInfo decodes the body of GET /api/info. It requires a non-empty
// string version and an integer pid: only then is the answer OpenCode's.
func ParseInfo(body []byte) (Info, error) {
	var raw struct {
		Version *string         `json:"version"`
		PID     json.RawMessage `json:"pid"`
		URLs    []string        `json:"urls"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Info{}, fmt.Errorf("info is not a JSON object: %w", err)
	}
	if raw.Version == nil || *raw.Version == "" {
		return Info{}, errors.New("info has no string \"version\"")
	}
	var pid int64
	if err := json.Unmarshal(raw.PID, &pid); err != nil || pid <= 0 || int64(int(pid)) != pid {
		return Info{}, errors.New("info has no integer \"pid\"")
	}
	return Info{Version: *raw.Version, PID: int(pid), URLs: raw.URLs}, nil
}

// ParseHealthV2 decodes the body of the v2 preview build's GET
// /api/health: {"healthy":true,"version":V,"pid":P}. It requires healthy
// true, a non-empty string version and an integer pid: only then is the
// answer OpenCode 2's (1.18.34 answers {"healthy":true} there).
func ParseHealthV2(body []byte) (Info, error) {
	var raw struct {
		Healthy *bool `json:"healthy"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Info{}, fmt.Errorf("health is not a JSON object: %w", err)
	}
	if raw.Healthy == nil || !*raw.Healthy {
		return Info{}, errors.New("health has no \"healthy\": true")
	}
	info, err := ParseInfo(body)
	if err != nil {
		return Info{}, fmt.Errorf("health: %w", err)
	}
	return info, nil
}

// parseStatusOld decodes 2.0.0–2.0.5's GET /api/status: a string version
// "2.…", a pid if any.
func parseStatusOld(body []byte) (Info, error) {
	var s struct {
		Version *string         `json:"version"`
		PID     json.RawMessage `json:"pid"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.Version == nil || *s.Version == "" {
		return Info{}, errors.New("status has no string \"version\"")
	}
	var pid int
	_ = json.Unmarshal(s.PID, &pid)
	return Info{Version: *s.Version, PID: max(pid, 0)}, nil
}

// Doc reads GET /openapi.json, the server's OpenAPI description.
func (v *ClientV2) Doc(ctx context.Context) ([]byte, error) {
	return v.get(ctx, opDocV2, "/openapi.json", nil)
}

// LocationBooted reports whether dir's location is booted, without booting
// it: GET /api/debug/location where the server offers it. known is false
// when it does not (no such route, or it answered 404): then booted says
// nothing, and no request was sent after the first 404.
func (v *ClientV2) LocationBooted(ctx context.Context, dir string) (booted, known bool, err error) {
	locs, known, err := v.BootedLocations(ctx)
	if !known || err != nil {
		return false, known, err
	}
	return LocationListed(locs, dir), true, nil
}

// LocationListed reports whether dir is among the booted locations locs,
// compared as cleaned paths (a trailing slash is the same location).
func LocationListed(locs []string, dir string) bool {
	want := path.Clean(dir)
	for _, l := range locs {
		if path.Clean(l) == want {
			return true
		}
	}
	return false
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
		body, gone, err = v.getCap(ctx, CapLocations, op, nil)
	} else if v.mem.has(op) {
		body, err = v.get(ctx, op, routeLocations, nil)
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

// patienceOver reports whether the description failed
// descriptionPatience reads in a row, and warns the first time.
func (v *ClientV2) patienceOver() bool {
	d := &v.mem.desc
	d.mu.Lock()
	n, note := d.retry.n, ""
	over := n >= descriptionPatience
	first := over && !d.patienceTold
	if first {
		d.patienceTold = true
		if d.rs != nil {
			note = d.rs.docNote
		}
	}
	d.mu.Unlock()
	if first {
		v.logger().Warn("OpenCode 2 API description still unreadable; checks of directories OpenCode armed no longer wait for it and read them as without one: a location disposed meanwhile boots again",
			"url", v.URL(), "failed_reads", n, "why", note)
	}
	return over
}

// ParseLocationsV2 decodes GET /api/debug/location: an array of
// {"directory":D,"workspaceID"?:W}. An entry without a string directory is
// skipped; anything but an array is an error.
func ParseLocationsV2(body []byte) ([]string, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("locations are not a JSON array: %w", err)
	}
	if raw == nil {
		return nil, errors.New("locations are null, not a JSON array")
	}
	dirs := make([]string, 0, len(raw))
	for _, item := range raw {
		var l struct {
			Directory json.RawMessage `json:"directory"`
		}
		var d string
		if json.Unmarshal(item, &l) == nil && json.Unmarshal(l.Directory, &d) == nil && d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}
