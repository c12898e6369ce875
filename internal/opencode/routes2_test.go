package opencode_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// routesOf is each capability's route.
func routesOf(caps []opencode.Capability) map[string]string {
	out := map[string]string{}
	for _, c := range caps {
		out[c.Name] = c.Route
	}
	return out
}

// A new client offers OpenCode 2.1.2's routes, the booted-location list
// included, each with what the daemon does without it, and asks nothing
// to know them (no description is read).
func TestCapabilitiesAre212sRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.New(nil)
		tr, stop := fake.Serve()
		defer stop()
		c, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
		if err != nil {
			t.Fatal(err)
		}
		caps := c.Capabilities()
		want := map[string]string{
			opencode.CapVersion: "GET /api/info", opencode.CapStatus: "GET /api/mcp",
			opencode.CapConnect: "POST /api/experimental/mcp/{name}/connect", opencode.CapConfig: "GET /api/config",
			opencode.CapEvents: "GET /api/event", opencode.CapLocations: "GET /api/debug/location",
		}
		if got := routesOf(caps); !equalMaps(got, want) {
			t.Errorf("routes = %v, want %v", got, want)
		}
		for _, cp := range caps {
			if cp.Missing != "" || cp.Without == "" {
				t.Errorf("%+v", cp)
			}
		}
		if n := len(fake.Requests()); n != 0 {
			t.Errorf("%d requests to know the routes", n)
		}
	})
}

// A route that answers 404 without an OpenCode error tag is not asked
// again within its backoff step (TestStatusRouteThatAnswered404ComesBack:
// after it, it is), and the capability says why it is gone: here a
// server without the config route. MCPConfig then fails, saying what the
// daemon runs without: no config is guessed.
func TestRouteThatAnswered404IsNotAskedAgain(t *testing.T) {
	const dir = "/p"
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		asked := map[string]int{}
		tr, stop := fakeopencode.ServeHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			asked[r.Method+" "+r.URL.Path]++
			mu.Unlock()
			switch r.URL.Path {
			case "/api/experimental/mcp/web/connect":
				w.WriteHeader(http.StatusNoContent)
			default:
				w.WriteHeader(http.StatusNotFound)
			}
		}))
		defer stop()
		const url = "http://127.0.0.1:4096"
		c, _ := opencode.NewV2(url, opencode.Options{Password: "pw", Transport: tr})
		ctx := context.Background()
		for range 3 {
			cfg, err := c.MCPConfig(ctx, dir)
			if cfg != nil || !errors.Is(err, opencode.ErrUnavailable) || !strings.Contains(err.Error(), "server kinds unknown") {
				t.Fatalf("config = %+v, %v; want none, and the gap said", cfg, err)
			}
			if _, err := c.MCPStatus(ctx, dir); !errors.Is(err, opencode.ErrUnavailable) {
				t.Fatalf("status of a server without the route: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		mu.Lock()
		if asked["GET /api/config"] != 1 || asked["GET /api/mcp"] != 1 || len(asked) != 2 {
			t.Errorf("asked %v: each missing route once, nothing else", asked)
		}
		mu.Unlock()
		for _, cp := range c.Capabilities() {
			if (cp.Name == opencode.CapConfig || cp.Name == opencode.CapStatus) && (cp.Missing == "" || !strings.Contains(cp.Missing, "answered 404")) {
				t.Errorf("%+v", cp)
			}
		}
		// A tagged 404 is OpenCode's answer, not a missing route.
		if err := c.Connect(ctx, dir, "web"); err != nil {
			t.Errorf("connect: %v", err)
		}
		// A new client (the next detection) asks again.
		c, _ = opencode.NewV2(url, opencode.Options{Password: "pw", Transport: tr})
		_, _ = c.MCPConfig(ctx, dir)
		mu.Lock()
		defer mu.Unlock()
		if asked["GET /api/config"] != 2 {
			t.Errorf("the next detection did not ask again: %v", asked)
		}
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
