package opencode_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// OpenCode never redirects, so a redirect is not followed: following it
// would carry the basic-auth password to wherever it points. A redirect
// to another port of the same host is the case that matters, since
// net/http itself drops Authorization only when the host name changes.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var reached []string // requests that arrived elsewhere, with their Authorization
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer elsewhere.Close()
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), code)
		}))
		o := opencode.Options{Password: "s3cret-pw", Timeout: 2 * time.Second}
		c1, err := opencode.New(origin.URL, o)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := opencode.NewV2(origin.URL, o)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		calls := map[string]func() error{
			"1.x GET /mcp":      func() error { _, err := c1.MCPStatus(ctx, "/d"); return err },
			"1.x GET /config":   func() error { _, err := c1.MCPConfig(ctx, "/d"); return err },
			"1.x POST connect":  func() error { return c1.Connect(ctx, "/d", "s") },
			"2.x GET /api/mcp":  func() error { _, err := c2.MCPStatus(ctx, "/d"); return err },
			"2.x POST connect":  func() error { return c2.Connect(ctx, "/d", "s") },
			"2.x GET /api/info": func() error { _, err := c2.Info(ctx); return err },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, opencode.ErrUnavailable) {
				t.Errorf("%d, %s: err = %v, want ErrUnavailable (a redirect is not an answer)", code, name, err)
			}
		}
		origin.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 0 {
		t.Fatalf("redirects were followed to another server: %q", reached)
	}
}
