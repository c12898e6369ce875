package opencode

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
)

// The transport of the 2.x client: how a ClientV2 sends a request of a
// capability's route (basic auth and timeouts are the 1.x Client's), sorts
// a 2.x answer into nil or an *Error (error tags, 401/403/404, the hint
// for a refused password), and treats a route that answered as missing
// (a backoff step before it is asked again). The calls are in v2.go.

// The 2.x error tags the client tells apart ({"_tag": …} error bodies).
const (
	tagUnauthorized     = "UnauthorizedError"
	tagMCPNotFound      = "McpServerNotFoundError"
	tagLocationDenied   = "LocationPermissionDeniedError"
	locationParam       = "location[directory]"
	maxErrorTagBodySize = 64 << 10
)

// locQuery selects dir's location. 2.x ignores ?directory= and would answer
// for its own working directory ($HOME for the shared service) instead.
func locQuery(dir string) string { return url.QueryEscape(locationParam) + "=" + url.QueryEscape(dir) }

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

// get is a GET of a 2.x JSON route; it returns the 2xx body.
func (v *ClientV2) get(ctx context.Context, op, escPath, query string) ([]byte, error) {
	status, body, err := v.c.send(ctx, v.c.http, v.c.timeout, op, "GET", escPath, query, nil)
	if err != nil {
		return nil, err
	}
	if err := v.c.classifyV2(op, status, body); err != nil {
		return nil, err
	}
	return body, nil
}

// call is one request of capability capName, sent to its usable routes
// in turn, best first, with arg in the route's path parameter (a server
// name): a route that answers as missing (routeMissing) waits out its
// backoff step and the next is tried. It returns the route that answered
// and its 2xx body, or the error classify makes of its answer; gone, with
// errNoRoute's error for op, when no route is left.
func (v *ClientV2) call(ctx context.Context, capName, op string, hc *http.Client, timeout time.Duration, arg, query string, classify func(op string, status int, body []byte) error) (p string, body []byte, gone bool, err error) {
	method, paths := v.usable(ctx, capName)
	for _, p := range paths {
		rop := method + " " + p
		esc := strings.Replace(apidesc.Template(p), "{}", url.PathEscape(arg), 1)
		status, body, err := v.c.send(ctx, hc, timeout, rop, method, esc, query, nil)
		if err != nil {
			return p, nil, false, err
		}
		if routeMissing(status, body) {
			v.drop(capName, method, p, status)
			continue
		}
		if err := classify(rop, status, body); err != nil {
			return p, nil, false, err
		}
		v.found(method, p)
		return p, body, false, nil
	}
	if len(paths) > 0 {
		op = method + " " + paths[0] // the error names the route tried first
	}
	return "", nil, true, v.errNoRoute(ctx, op, capName)
}

// getCap is a GET of the route of a single-route capability. gone is true
// when the server has no such route (now or since an earlier 404).
func (v *ClientV2) getCap(ctx context.Context, name, op, query string) (body []byte, gone bool, err error) {
	_, body, gone, err = v.call(ctx, name, op, v.c.http, v.c.timeout, "", query, v.c.classifyV2)
	return body, gone, err
}

// unexpected is the error for a 2xx answer that is not the expected JSON.
func (v *ClientV2) unexpected(op string, err error) error {
	return &Error{Op: op, URL: v.URL(), Status: http.StatusOK, Detail: err.Error(), kind: ErrUnavailable}
}
