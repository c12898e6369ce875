package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Generation is the major version of the OpenCode API a server speaks.
type Generation int

// The generations Detect tells apart.
const (
	// GenUnknown: nothing answered as OpenCode (yet).
	GenUnknown Generation = iota
	// V1: OpenCode 1.x (/global/health, ?directory=).
	V1
	// V2: OpenCode 2.x (/api/*, location[directory]).
	V2
)

func (g Generation) String() string {
	switch g {
	case V1:
		return "1.x"
	case V2:
		return "2.x"
	}
	return "unknown"
}

// DetectTimeout bounds each request Detect makes.
const DetectTimeout = 2 * time.Second

// Detect asks the server at baseURL which OpenCode generation it is, and
// returns its version and, for 2.x, its pid. The probes, in order (each
// must answer the expected JSON; a status code alone proves nothing, since
// 2.x's web UI answers 200 HTML to any unknown GET and 1.18.34 serves some
// /api/* routes of its own):
//
//  1. GET /api/info with the credentials: a string version and an integer
//     pid → V2 (the version need not be 2.x.y: development builds report
//     "local"; only a 1.x version is refused). A 401 whose body is 2.x's
//     UnauthorizedError → V2 with an error matching ErrUnauthorized: the
//     password is wrong (1.18.34 refuses with an empty body instead).
//  2. GET /global/health: {"healthy":true,"version":"1.…"} → V1; refused,
//     a 1.x server with a wrong password (ErrUnauthorized).
//
// A probe answered 503 with a Retry-After (OpenCode 2 starting or
// stopping) ends detection with an error matching ErrNotYet, which
// carries the wait. Anything else is an error matching ErrUnavailable
// (not ready, or not OpenCode) that names what each probe answered, or
// ErrUnauthorized when a probe was refused. Each request takes at most
// DetectTimeout (or o.Timeout, if shorter).
func Detect(ctx context.Context, baseURL string, o Options) (Generation, string, int, error) {
	timeout := DetectTimeout
	if o.Timeout > 0 && o.Timeout < timeout {
		timeout = o.Timeout
	}
	c, err := New(baseURL, o)
	if err != nil {
		return GenUnknown, "", 0, err
	}
	// OpenCode 2 starting or stopping (ErrNotYet): every route says so,
	// and no probe can tell more until it is ready.
	probe := func(route string) (int, []byte, error) {
		return c.send(ctx, c.http, timeout, "GET "+route, "GET", route, "", nil)
	}
	status, body, err := probe("/api/info")
	if err != nil {
		// Nothing listens, or it hangs: the other probes would only wait
		// for the same. No route was answered: the error names the
		// address, not the 2.x route asked first (a 1.x user with a
		// wrong port would read a route they never heard of).
		var oe *Error
		if errors.As(err, &oe) && oe.Status == 0 && !errors.Is(err, ErrNotYet) {
			oe.Op = ""
			switch {
			case oe.refused:
				oe.Detail = "connection refused: nothing listens on " + c.base.Host
			case oe.Detail == "timed out":
				oe.Detail = fmt.Sprintf("no answer within %s", timeout)
			}
		}
		return GenUnknown, "", 0, err
	}
	switch {
	case status == http.StatusOK:
		if info, err := ParseInfo(body); err == nil && Major(info.Version) != 1 {
			return V2, info.Version, info.PID, nil
		}
	case status == http.StatusUnauthorized && errorTag(body) == tagUnauthorized:
		return V2, "", 0, &Error{Op: "GET /api/info", URL: c.URL(), Status: status,
			Detail: "OpenCode 2 refused the password", kind: ErrUnauthorized, hint: hintV2}
	}

	status2 := status
	status, body, err = probe("/global/health")
	if err != nil {
		return GenUnknown, "", 0, err
	}
	switch {
	case status == http.StatusOK:
		var h struct {
			Healthy *bool   `json:"healthy"`
			Version *string `json:"version"`
		}
		if json.Unmarshal(body, &h) == nil && h.Healthy != nil && h.Version != nil && Major(*h.Version) == 1 {
			if !*h.Healthy {
				return V1, *h.Version, 0, &Error{Op: "GET /global/health", URL: c.URL(), Status: status, Detail: "OpenCode 1.x reports itself unhealthy", kind: ErrUnavailable}
			}
			return V1, *h.Version, 0, nil
		}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return GenUnknown, "", 0, &Error{Op: "GET /global/health", URL: c.URL(), Status: status, kind: ErrUnauthorized}
	}

	kind := ErrUnavailable
	if status2 == http.StatusUnauthorized || status2 == http.StatusForbidden {
		kind = ErrUnauthorized
	}
	// What each probe answered, by the generation that offers its route:
	// the error names what was tried in the user's terms.
	return GenUnknown, "", 0, &Error{URL: c.URL(), kind: kind,
		Detail: fmt.Sprintf("it answers, but not (yet) as an OpenCode this daemon knows: asked as OpenCode 1.x (GET /global/health answered %d) and as 2.x (GET /api/info answered %d)",
			status, status2)}
}

// Major is the OpenCode line a version string names: 1 for "1.18.34", 2
// for "2.1.2" or "v2.1.2"; -1 when v is no version. It is the one reading of a
// version's line: detection and run (launch.ParseMajor) ask it.
func Major(v string) int {
	head, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 || head == "" || head[0] == '+' || head[0] == '-' {
		return -1
	}
	return n
}
