package opencode_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// notReady answers as OpenCode 2's service does while it starts (facts
// §6): 503 {"code": code} with retry-after.
func notReady(code, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"` + code + `"}`))
	}
}

// "Not yet" is an error kind of its own, which is ErrUnavailable too (so
// every counter is kept) and carries the wait; a 503 without Retry-After
// is a plain unavailable answer.
func TestNotYetIsItsOwnErrorKind(t *testing.T) {
	for _, c := range []struct {
		retryAfter string
		notYet     bool
		wait       time.Duration
	}{
		{"1", true, time.Second},
		{"120", true, 2 * time.Minute},
		{"86400", true, 5 * time.Minute}, // capped
		{"", false, 0},
		{"soon", false, 0},
	} {
		srv := httptest.NewServer(notReady("service_starting", c.retryAfter))
		v, _ := opencode.NewV2(srv.URL, opencode.Options{Password: "pw"})
		_, err := v.MCPStatus(context.Background(), "/p")
		srv.Close()
		wait, ok := opencode.RetryAfter(err)
		if !errors.Is(err, opencode.ErrUnavailable) || errors.Is(err, opencode.ErrNotYet) != c.notYet || ok != c.notYet || wait != c.wait {
			t.Errorf("retry-after %q: err %v, not yet %v, wait %v; want not yet %v, wait %v", c.retryAfter, err, errors.Is(err, opencode.ErrNotYet), wait, c.notYet, c.wait)
		}
	}
}

// Detection of a service that is starting ends at the first "not yet",
// whichever probe heard it: 2.0.21's /api/info, or the preview build's
// /api/health (its /api/info is 404).
func TestDetectNotYet(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"2.0.21": notReady("service_starting", "1"),
		"preview": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/health" {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNotFound)
		},
	} {
		srv := httptest.NewServer(h)
		gen, _, _, err := opencode.Detect(context.Background(), srv.URL, opencode.Options{Password: "pw"})
		srv.Close()
		if wait, ok := opencode.RetryAfter(err); gen != opencode.GenUnknown || !ok || wait != time.Second {
			t.Errorf("%s: %v, %v; want not yet, for a second", name, gen, err)
		}
	}
}
