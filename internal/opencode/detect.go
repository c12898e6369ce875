package opencode

import (
	"context"
	"encoding/json"
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
// returns its version and, for 2.x from 2.0.6, its pid. The probes, in
// order (each must answer the expected JSON; a status code alone proves
// nothing, since 2.x's web UI answers 200 HTML to any unknown GET):
//
//  1. GET /api/info with the credentials: a string version of major ≥ 2 and
//     an integer pid → V2. A 401 whose body is 2.x's UnauthorizedError →
//     V2 with an error matching ErrUnauthorized: the password is wrong.
//  2. GET /global/health: {"healthy":true,"version":"1.…"} → V1.
//  3. GET /api/status: a version "2.…" → V2 (2.0.0–2.0.5, pid 0).
//
// Anything else is an error matching ErrUnavailable (not ready, or not
// OpenCode) that names what each probe answered, or ErrUnauthorized when a
// probe was refused (a 1.x server with a wrong password cannot tell its
// version). Each request takes at most DetectTimeout (or o.Timeout, if
// shorter).
func Detect(ctx context.Context, baseURL string, o Options) (Generation, string, int, error) {
	timeout := DetectTimeout
	if o.Timeout > 0 && o.Timeout < timeout {
		timeout = o.Timeout
	}
	c, err := New(baseURL, o)
	if err != nil {
		return GenUnknown, "", 0, err
	}
	var seen []string
	refused := false
	probe := func(route string) (int, []byte, error) {
		status, body, err := c.send(ctx, c.http, timeout, "GET "+route, "GET", route, nil, nil)
		if err == nil {
			seen = append(seen, fmt.Sprintf("%s answered %d", route, status))
			refused = refused || status == http.StatusUnauthorized || status == http.StatusForbidden
		}
		return status, body, err
	}

	status, body, err := probe("/api/info")
	if err != nil {
		// Nothing listens, or it hangs: the other probes would only wait
		// for the same.
		return GenUnknown, "", 0, err
	}
	switch {
	case status == http.StatusOK:
		if info, err := ParseInfo(body); err == nil && major(info.Version) >= 2 {
			return V2, info.Version, info.PID, nil
		}
	case status == http.StatusUnauthorized && errorTag(body) == tagUnauthorized:
		return V2, "", 0, &Error{Op: "GET /api/info", URL: c.URL(), Status: status,
			Detail: "OpenCode 2.x refused the password (2.x authenticates as user \"opencode\"; its password is in service.json or OPENCODE_PASSWORD)",
			kind:   ErrUnauthorized}
	}

	status, body, err = probe("/global/health")
	if err != nil {
		return GenUnknown, "", 0, err
	}
	if status == http.StatusOK {
		var h struct {
			Healthy *bool   `json:"healthy"`
			Version *string `json:"version"`
		}
		if json.Unmarshal(body, &h) == nil && h.Healthy != nil && h.Version != nil && major(*h.Version) == 1 {
			if !*h.Healthy {
				return V1, *h.Version, 0, &Error{Op: "GET /global/health", URL: c.URL(), Status: status, Detail: "OpenCode 1.x reports itself unhealthy", kind: ErrUnavailable}
			}
			return V1, *h.Version, 0, nil
		}
	}

	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		// 1.x with a wrong password (2.x would have said so at /api/info):
		// asking a third route would only be refused again.
		return GenUnknown, "", 0, &Error{Op: "GET /global/health", URL: c.URL(), Status: status, kind: ErrUnauthorized}
	}

	status, body, err = probe("/api/status")
	if err != nil {
		return GenUnknown, "", 0, err
	}
	if status == http.StatusOK {
		var s struct {
			Version *string         `json:"version"`
			PID     json.RawMessage `json:"pid"`
		}
		if json.Unmarshal(body, &s) == nil && s.Version != nil && major(*s.Version) == 2 {
			var pid int
			_ = json.Unmarshal(s.PID, &pid)
			return V2, *s.Version, max(pid, 0), nil
		}
	}

	kind := ErrUnavailable
	if refused {
		kind = ErrUnauthorized
	}
	return GenUnknown, "", 0, &Error{Op: "detect", URL: c.URL(),
		Detail: "not (yet) an OpenCode server this daemon knows: " + strings.Join(seen, ", "), kind: kind}
}

// major is the major number of a version such as "2.0.21" or "v1.18.34",
// or -1.
func major(v string) int {
	v = strings.TrimPrefix(v, "v")
	head, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 || head == "" || head[0] == '+' || head[0] == '-' {
		return -1
	}
	return n
}
