package opencode_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// routesOf is each capability's route ("" when absent).
func routesOf(caps []opencode.Capability) map[string]string {
	out := map[string]string{}
	for _, c := range caps {
		out[c.Name] = c.Route
	}
	return out
}

// capsAgainst serves a fake of profile p with doc as its description and
// returns what a new client chooses.
func capsAgainst(t *testing.T, p fake2.Profile, doc string) ([]opencode.Capability, *fake2.Server) {
	t.Helper()
	fake := fake2.NewProfile(p, nil)
	if doc != "" {
		fake.SetDoc([]byte(doc))
	}
	tr, stop := fake.Serve()
	t.Cleanup(stop)
	c, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
	if err != nil {
		t.Fatal(err)
	}
	return c.Capabilities(context.Background()), fake
}

// The real preview build's own description (the file served by the
// preview fake is the real one, from ../shared/reference) gives its
// routes: version at /api/health, connect on the development route, no
// config route, booted locations at /api/debug/location.
func TestRoutesFromPreviewDescription(t *testing.T) {
	ref, err := os.ReadFile("fakeopencode/fake2/testdata/opencode-v2-preview-openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := apidesc.Parse(ref)
	if err != nil || len(d.Paths()) != 93 {
		t.Fatalf("preview description: %d paths, %v", len(d.Paths()), err)
	}
	for _, r := range [][2]string{{"GET", "/api/health"}, {"POST", "/api/mcp/{name}/connect"}, {"GET", "/api/debug/location"}, {"DELETE", "/api/debug/location"}} {
		if _, ok := d.Offers(r[0], r[1]); !ok {
			t.Errorf("%s %s not offered", r[0], r[1])
		}
	}
	for _, r := range [][2]string{{"GET", "/api/info"}, {"GET", "/api/config"}, {"POST", "/api/experimental/mcp/{name}/connect"}, {"GET", "/api/status"}, {"POST", "/api/mcp"}} {
		if p, ok := d.Offers(r[0], r[1]); ok {
			t.Errorf("%s %s offered as %s", r[0], r[1], p)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		caps, fake := capsAgainst(t, fake2.Preview, "")
		want := map[string]string{
			opencode.CapVersion: "GET /api/health", opencode.CapStatus: "GET /api/mcp",
			opencode.CapConnect: "POST /api/mcp/{name}/connect", opencode.CapConfig: "",
			opencode.CapEvents: "GET /api/event", opencode.CapLocations: "GET /api/debug/location",
		}
		if got := routesOf(caps); !equalMaps(got, want) {
			t.Errorf("routes = %v, want %v", got, want)
		}
		for _, c := range caps {
			if !c.FromDescription {
				t.Errorf("%s: not from the description", c.Name)
			}
			if c.Name == opencode.CapConfig && (!strings.Contains(c.Missing, "not in the server's API description") || !strings.Contains(c.Without, "config files")) {
				t.Errorf("config: %+v", c)
			}
		}
		if n := fake.Count(fake2.RouteDoc, "", ""); n != 1 {
			t.Errorf("description read %d times", n)
		}
	})
}

// OpenCode 2.1.2's own description (the fake's default, recorded) gives
// its routes, the booted-location list included.
func TestRoutesFrom212Description(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caps, _ := capsAgainst(t, fake2.Release212, "")
		want := map[string]string{
			opencode.CapVersion: "GET /api/info", opencode.CapStatus: "GET /api/mcp",
			opencode.CapConnect: "POST /api/experimental/mcp/{name}/connect", opencode.CapConfig: "GET /api/config",
			opencode.CapEvents: "GET /api/event", opencode.CapLocations: "GET /api/debug/location",
		}
		if got := routesOf(caps); !equalMaps(got, want) {
			t.Errorf("routes = %v, want %v", got, want)
		}
	})
}

// Without a readable description the facts' routes are the defaults,
// and the capabilities say so.
func TestRoutesWithoutDescription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, doc := range []string{"<!doctype html>", `{"paths":{"/doc":{"get":{}}}}`, `{"openapi":"3.1.0"}`} {
			caps, _ := capsAgainst(t, fake2.Release212, doc)
			want := map[string]string{
				opencode.CapVersion: "GET /api/info", opencode.CapStatus: "GET /api/mcp",
				opencode.CapConnect: "POST /api/experimental/mcp/{name}/connect", opencode.CapConfig: "GET /api/config",
				opencode.CapEvents: "GET /api/event", opencode.CapLocations: "",
			}
			if got := routesOf(caps); !equalMaps(got, want) {
				t.Errorf("%q: routes = %v, want %v", doc, got, want)
			}
			for _, c := range caps {
				if c.FromDescription || c.Name == opencode.CapLocations && !strings.Contains(c.Missing, "no API description") {
					t.Errorf("%q: %+v", doc, c)
				}
			}
		}
	})
}

// The description is read once per client, however many calls race for
// it at first.
func TestDescriptionReadOnceByConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, c := v2Rig(t, map[string]fake2.Spec{"a": {}})
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				switch i % 3 {
				case 0:
					_, _ = c.MCPStatus(context.Background(), "/p")
				case 1:
					_ = c.Connect(context.Background(), "/p", "a")
				default:
					c.Capabilities(context.Background())
				}
			})
		}
		wg.Wait()
		if n := fake.Count(fake2.RouteDoc, "", ""); n != 1 {
			t.Errorf("description read %d times, want once", n)
		}
	})
}

// A route that answers 404 without an OpenCode error tag is not asked
// again within its backoff step (TestStatusRouteThatAnswered404ComesBack:
// after it, it is), and the capability
// says why it is gone: here a config route the description claims, which
// the server does not serve. MCPConfig then reads the config files.
func TestRouteThatAnswered404IsNotAskedAgain(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("OPENCODE_CONFIG_DIR", t.TempDir())
	t.Setenv("OPENCODE_CONFIG", "")
	if err := os.WriteFile(dir+"/opencode.jsonc", []byte(`{"mcp":{"servers":{"web":{"type":"remote","url":"http://127.0.0.1:9/mcp",},},},}`), 0o600); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		asked := map[string]int{}
		tr, stop := fakeopencode.ServeHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			asked[r.Method+" "+r.URL.Path]++
			mu.Unlock()
			switch r.URL.Path {
			case "/openapi.json":
				_, _ = io.WriteString(w, fake2.DefaultDoc)
			case "/api/experimental/mcp/web/connect":
				w.WriteHeader(http.StatusNoContent)
			default:
				w.WriteHeader(http.StatusNotFound)
			}
		}))
		defer stop()
		// A loopback address (the pipe answers at any): the config files
		// are this machine's.
		const url = "http://127.0.0.1:4096"
		c, _ := opencode.NewV2(url, opencode.Options{Password: "pw", Transport: tr})
		ctx := context.Background()
		for range 3 {
			cfg, err := c.MCPConfig(ctx, dir)
			if err != nil || cfg["web"].Type != "remote" || cfg["web"].URL != "http://127.0.0.1:9/mcp" {
				t.Fatalf("config = %+v, %v; want the file's", cfg, err)
			}
			if _, err := c.MCPStatus(ctx, dir); !errors.Is(err, opencode.ErrUnavailable) {
				t.Fatalf("status of a server without the route: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		mu.Lock()
		if asked["GET /api/config"] != 1 || asked["GET /api/mcp"] != 1 || asked["GET /openapi.json"] != 1 {
			t.Errorf("asked %v: each missing route once, the description once", asked)
		}
		mu.Unlock()
		for _, cp := range c.Capabilities(ctx) {
			if (cp.Name == opencode.CapConfig || cp.Name == opencode.CapStatus) && (cp.Available() || !strings.Contains(cp.Missing, "answered 404")) {
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
