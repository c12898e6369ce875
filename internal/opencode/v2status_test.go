package opencode_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// Booted locations are listed without booting one; where the server has
// no such list, known is false and nothing is asked.
func TestLocationBooted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		server := func(fake *fake2.Server) *opencode.Server {
			tr, stop := fake.Serve()
			t.Cleanup(stop)
			s, err := opencode.NewServer(opencode.ServerOptions{URL: fake2.URL, Client: opencode.Options{Transport: tr, Password: fake2.DefaultPassword}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		booted := func(s *opencode.Server, dir string) (booted, known bool, err error) {
			dirs, known, err := s.BootedLocations(ctx)
			return opencode.LocationListed(dirs, dir), known, err
		}
		fake := fake2.New(map[string]fake2.Spec{"a": {}})
		s := server(fake)
		if booted, known, err := booted(s, "/p"); booted || !known || err != nil {
			t.Fatalf("before any read: %v %v %v", booted, known, err)
		}
		if len(fake.Instances()) != 0 {
			t.Fatalf("asking booted %v", fake.Instances())
		}
		_, _ = s.MCPStatus(ctx, "/p")
		if booted, known, err := booted(s, "/p/"); !booted || !known || err != nil {
			t.Fatalf("after a read: %v %v %v", booted, known, err)
		}
		fake.Shutdown("/p")
		if booted, _, _ := booted(s, "/p"); booted {
			t.Fatal("booted after a disposal")
		}

		// A server without the list (404, no OpenCode tag): not known,
		// and not asked again within its backoff step.
		asked := 0
		tr, stop := fakeopencode.ServeHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked++
			w.WriteHeader(http.StatusNotFound)
		}))
		t.Cleanup(stop)
		noList, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if dirs, known, err := noList.BootedLocations(ctx); dirs != nil || known || err != nil {
				t.Fatalf("a server without the list: %v %v %v", dirs, known, err)
			}
		}
		if asked != 1 {
			t.Errorf("a server without the list was asked %d times, want once", asked)
		}
	})
}

// An empty answer is read once more after a short delay (right after a
// boot it may not be final), but a directory that really has no server
// costs one read per check after that.
func TestEmptyStatusIsReadAgainOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.New(nil)
		tr, stop := fake.Serve()
		t.Cleanup(stop)
		c, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		fake.SetStatusOverride(func(dir string) (int, string, bool) {
			calls++
			if calls == 1 {
				return 200, `{"location":{"directory":"/p","project":{"id":"x","directory":"/p"}},"data":[]}`, false
			}
			return 200, `{"location":{"directory":"/p","project":{"id":"x","directory":"/p"}},"data":[{"name":"a","status":{"status":"pending"}}]}`, false
		})
		ctx := context.Background()
		start := time.Now()
		st, err := c.MCPStatus(ctx, "/p")
		if err != nil || st["a"].Status != "pending" || time.Since(start) != opencode.EmptyRereadDelay {
			t.Fatalf("status %v, %v after %v; want the second read's, %v later", st, err, time.Since(start), opencode.EmptyRereadDelay)
		}
		fake.SetStatusOverride(func(string) (int, string, bool) {
			return 200, `{"location":{"directory":"/q","project":{"id":"x","directory":"/q"}},"data":[]}`, false
		})
		fake.ResetRequests()
		for range 3 {
			if st, err := c.MCPStatus(ctx, "/q"); err != nil || len(st) != 0 {
				t.Fatalf("empty directory: %v %v", st, err)
			}
		}
		if n := fake.Count(fake2.RouteMCP, "/q", ""); n != 4 {
			t.Errorf("reads of an empty directory = %d, want 4 (the first re-read once)", n)
		}
	})
}
