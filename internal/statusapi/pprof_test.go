package statusapi

import (
	"net/http"
	"strings"
	"testing"
)

// The runtime's profiles show every string the daemon holds (directories,
// server names, commands): without this daemon's token, or with another
// one, they are refused like a mutation; with it, a heap profile comes.
func TestProfilesNeedTheToken(t *testing.T) {
	_, _, hs := newAPI(t)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=2", "/debug/pprof/profile?seconds=1"} {
		for name, auth := range map[string]string{"none": "", "wrong": "Bearer nope", "basic": "Basic " + testToken} {
			hdr := map[string]string{}
			if auth != "" {
				hdr["Authorization"] = auth
			}
			code, body := request(t, hs, "GET", path, "", hdr)
			if code != http.StatusUnauthorized || strings.Contains(body, testToken) {
				t.Errorf("%s %s: %d %q, want 401 without the token", name, path, code, body)
			}
		}
	}
	code, body := request(t, hs, "GET", "/debug/pprof/heap?debug=1", "", map[string]string{"Authorization": "Bearer " + testToken})
	if code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Fatalf("with the token: %d %.200q", code, body)
	}
}
