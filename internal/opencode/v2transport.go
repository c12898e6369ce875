package opencode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
)

// The transport of the 2.x client: how a ClientV2 sends a request of a
// capability's route (basic auth and timeouts are the 1.x Client's), sorts
// a 2.x answer into nil or an *Error (error tags, 401/403/404, the hint
// for a refused password), and treats a route that answered as missing
// (a stated gap, and a backoff step before it is asked again). The calls
// are in v2.go.

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

// retry is the backoff of something that failed: how often in a row, and
// when to try it again.
type retry struct {
	n     int
	again time.Time
}

// retryPolicy spaces the requests of a route that answered as missing: 1 s,
// doubling to a minute.
var retryPolicy = backoff.Policy{Initial: time.Second, Max: time.Minute, Jitter: 0.2}

// fail counts one more failure and sets when to try again: the next
// backoff step, and no sooner than after (a server's Retry-After).
func (r *retry) fail(now time.Time, after time.Duration) time.Duration {
	r.n++
	d := max(retryPolicy.Jittered(retryPolicy.Base(r.n)), after)
	r.again = now.Add(d)
	return d
}

// routeMissing reports an answer that says the route does not exist: 405,
// or a 404 that is not one of OpenCode's own errors (those carry a _tag:
// McpServerNotFoundError, LocationNotFoundError).
func routeMissing(status int, body []byte) bool {
	return status == http.StatusMethodNotAllowed || status == http.StatusNotFound && errorTag(body) == ""
}

// Capabilities reports, for each thing the daemon uses, its route, or why
// this server lacks it for now (the route answered as missing, and its
// backoff step is not over).
func (v *ClientV2) Capabilities() []Capability {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	out := make([]Capability, 0, len(routesV2))
	for _, r := range routesV2 {
		c := Capability{Name: r.name, Route: r.route, Without: r.without}
		if m := v.missing[c.Route]; m != nil && now.Before(m.again) {
			c.Missing = fmt.Sprintf("%s answered 404 (no such route; asked again in %s)", c.Route, m.again.Sub(now).Round(time.Millisecond))
		}
		out = append(out, c)
	}
	return out
}

// call is one request of capability capName, with arg in the route's path
// parameter (a server name). It returns the route's 2xx body, or the error
// classify makes of its answer; gone, with an error that says what the
// daemon runs without, when the route answered as missing (routeMissing)
// now or within its backoff step.
func (v *ClientV2) call(ctx context.Context, capName string, hc *http.Client, timeout time.Duration, arg, query string, classify func(op string, status int, body []byte) error) (body []byte, gone bool, err error) {
	op, without := routeV2(capName)
	method, p, _ := strings.Cut(op, " ")
	v.mu.Lock()
	m := v.missing[op]
	waiting := m != nil && time.Now().Before(m.again)
	v.mu.Unlock()
	if !waiting {
		esc := strings.Replace(p, "{name}", url.PathEscape(arg), 1)
		status, body, err := v.c.send(ctx, hc, timeout, op, method, esc, query, nil)
		if err != nil {
			return nil, false, err
		}
		if !routeMissing(status, body) {
			if err := classify(op, status, body); err != nil {
				return nil, false, err
			}
			v.mu.Lock()
			delete(v.missing, op)
			v.mu.Unlock()
			return body, false, nil
		}
		v.drop(capName, op, status)
	}
	return nil, true, &Error{Op: op, URL: v.URL(), Detail: "this OpenCode 2 has no such route (it answered 404 or 405; asked again with backoff): " + without, kind: ErrUnavailable}
}

// drop leaves a route that answered as missing alone for its next backoff
// step, and says so the first time.
func (v *ClientV2) drop(capName, route string, status int) {
	v.mu.Lock()
	r := v.missing[route]
	if r == nil {
		r = &retry{}
		v.missing[route] = r
	}
	in := r.fail(time.Now(), 0)
	first := r.n == 1
	v.mu.Unlock()
	if first {
		v.log.Warn("OpenCode 2 route does not exist; asked again with backoff", "url", v.URL(), "capability", capName, "route", route, "status", status, "retry_in", in.Round(time.Millisecond))
	}
}

// getCap is a GET of a capability's route, whose 2xx body parse reads
// (what it cannot read is an unexpected answer). gone is true when the
// server has no such route (now or since an earlier 404).
func (v *ClientV2) getCap(ctx context.Context, name, query string, parse func([]byte) error) (gone bool, err error) {
	body, gone, err := v.call(ctx, name, v.c.http, v.c.timeout, "", query, v.c.classify)
	if err == nil {
		if err = parse(body); err != nil {
			op, _ := routeV2(name)
			err = v.c.unexpected(op, err)
		}
	}
	return gone, err
}
