package opencode

import (
	"context"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const descHost = "opencode.desc:4096"

// serveV2 serves h inside the synctest bubble and returns a Server for it.
func serveV2(t *testing.T, h http.HandlerFunc) *Server {
	t.Helper()
	hosts := fakeopencode.NewHosts()
	t.Cleanup(hosts.Close)
	hosts.Serve(descHost, h)
	s, err := NewServer(ServerOptions{URL: "http://" + descHost, Client: Options{Password: "pw", Transport: hosts.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// counts counts requests by path.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) add(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[p]++
	return c.n[p]
}

func (c *counts) get(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[p]
}

func capability(caps []Capability, name string) Capability {
	for _, c := range caps {
		if c.Name == name {
			return c
		}
	}
	return Capability{}
}

// A status route that answered 404 without an OpenCode error tag (a
// proxy, a route being registered) is not dropped for the detection: it
// is left alone for a backoff step, then asked again, and serves again.
func TestStatusRouteThatAnswered404ComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen counts
		s := serveV2(t, func(w http.ResponseWriter, r *http.Request) {
			n := seen.add(r.URL.Path)
			switch r.URL.Path {
			case "/api/info":
				_, _ = w.Write([]byte(`{"version":"2.0.21","pid":4242,"urls":[]}`))
			case "/api/mcp":
				if n == 1 {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				_, _ = w.Write([]byte(`{"location":{"directory":"/p"},"data":[{"name":"a","status":{"status":"failed"}}]}`))
			default:
				http.NotFound(w, r)
			}
		})
		ctx := context.Background()
		if _, err := s.MCPStatus(ctx, "/p"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a 404 without a tag: %v", err)
		}
		if _, err := s.MCPStatus(ctx, "/p"); !errors.Is(err, ErrUnavailable) || seen.get("/api/mcp") != 1 {
			t.Fatalf("within the backoff step: %v after %d requests; want no request", err, seen.get("/api/mcp"))
		}
		if c := capability(s.Capabilities(ctx), CapStatus); c.Missing == "" || !strings.Contains(c.Missing, "answered 404") || !strings.Contains(c.Missing, "asked again in") {
			t.Errorf("capability meanwhile: %+v", c)
		}
		time.Sleep(1200 * time.Millisecond)
		st, err := s.MCPStatus(ctx, "/p")
		if err != nil || st["a"].Status != StatusFailed {
			t.Fatalf("after the backoff step: %v, %v; want the route asked again", st, err)
		}
		if c := capability(s.Capabilities(ctx), CapStatus); c.Route != "GET /api/mcp" {
			t.Errorf("capability after: %+v", c)
		}
	})
}

// The query of a read is the one url.Values would encode, byte for byte,
// for every directory name: spaces, unicode, slashes, '+', '&', '#', '%',
// a NUL, invalid UTF-8; 2.x's bracketed key escaped as before.
func TestQueriesAreEncodedAsURLValuesEncodesThem(t *testing.T) {
	for _, dir := range []string{"/p/my project", "/p/ünï cødé/日本", "/p/a+b&c=d#e%f?g", "/p/\x00nul", "/p/\xff\xfe", "/p/a/b/", ""} {
		if got, want := dirQuery(dir), (url.Values{"directory": {dir}}).Encode(); got != want {
			t.Errorf("dirQuery(%q) = %q, want %q", dir, got, want)
		}
		if got, want := locQuery(dir), (url.Values{locationParam: {dir}}).Encode(); got != want {
			t.Errorf("locQuery(%q) = %q, want %q", dir, got, want)
		}
	}
}
