package opencode_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// previewRig serves a preview-profile fake and returns a client for it.
func previewRig(t *testing.T, servers map[string]fake2.Spec) (*fake2.Server, *opencode.ClientV2) {
	t.Helper()
	fake := fake2.NewPreview(servers)
	tr, stop := fake.Serve()
	t.Cleanup(stop)
	c, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

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
		fake := fake2.NewPreview(map[string]fake2.Spec{"a": {}})
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

		f212 := fake2.New(nil)
		s212 := server(f212)
		if booted, known, err := booted(s212, "/p"); booted || !known || err != nil {
			t.Fatalf("2.1.2: %v %v %v", booted, known, err)
		}
		if n := f212.Count(fake2.RouteUnknownAPI, "", ""); n != 0 {
			t.Errorf("2.1.2 was asked a route its description lacks")
		}
		noList := fake2.New(nil)
		noList.SetDoc([]byte(strings.Replace(fake2.DefaultDoc, `"/api/debug/location":`, `"/api/debug/locations-gone":`, 1)))
		if booted, known, err := booted(server(noList), "/p"); booted || known || err != nil {
			t.Fatalf("a description without the list: %v %v %v", booted, known, err)
		}
		if n := noList.Count(fake2.RouteUnknownAPI, "", ""); n != 0 {
			t.Errorf("a server without the list was asked for it")
		}
	})
}

// An empty answer is read once more after a short delay (right after a
// boot it may not be final), but a directory that really has no server
// costs one read per check after that.
func TestEmptyStatusIsReadAgainOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, c := previewRig(t, nil)
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

// The preview build sends session.execution.* without a location: the
// stream's parser gives them the directory their session was seen in
// (session.created, session.input.*), forgets deleted sessions, and
// remembers at most a bounded number.
func TestExecutionEventsGetTheirSessionsDirectory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.NewPreview(nil)
		tr, stop := fake.Serve()
		defer stop()
		var got []opencode.Event
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		srv, _ := opencode.NewServer(opencode.ServerOptions{URL: fake2.URL, Client: opencode.Options{Transport: tr, Password: fake2.DefaultPassword}})
		go func() {
			defer close(done)
			_ = srv.Stream(ctx, opencode.StreamOptions{}, func(ev opencode.Event) {
				if ev.Kind == opencode.KindActivity {
					got = append(got, ev)
				}
			})
		}()
		synctest.Wait()
		fake.Publish("/p", "session.execution.started", map[string]any{"sessionID": "ses_early"}) // unknown yet
		fake.Publish("/p", "session.created", map[string]any{"sessionID": "ses_1"})
		fake.Publish("/q", "session.input.admitted", map[string]any{"sessionID": "ses_2", "inputID": "msg_1"})
		fake.Publish("/p", "session.execution.started", map[string]any{"sessionID": "ses_1"})
		fake.Publish("/q", "session.execution.succeeded", map[string]any{"sessionID": "ses_2"})
		fake.Publish("/p", "session.deleted", map[string]any{"sessionID": "ses_1"})
		fake.Publish("/p", "session.execution.failed", map[string]any{"sessionID": "ses_1"})
		synctest.Wait()
		cancel()
		<-done
		var dirs []string
		for _, ev := range got {
			dirs = append(dirs, ev.Type+"@"+ev.Directory)
		}
		want := []string{"session.execution.started@", "session.created@/p", "session.input.admitted@/q",
			"session.execution.started@/p", "session.execution.succeeded@/q", "session.deleted@/p", "session.execution.failed@"}
		if !slices.Equal(dirs, want) {
			t.Errorf("events = %q\nwant %q", dirs, want)
		}
	})
}

func TestSessionMemoryIsBounded(t *testing.T) {
	p := opencode.NewSessionMemoryForTest(3)
	for i := range 5 {
		_, _ = p([]byte(fmt.Sprintf(`{"type":"session.created","location":{"directory":"/d%d"},"data":{"sessionID":"s%d"}}`, i, i)))
	}
	for i, want := range []string{"", "", "/d2", "/d3", "/d4"} {
		ev, _ := p([]byte(fmt.Sprintf(`{"type":"session.execution.started","data":{"sessionID":"s%d"}}`, i)))
		if ev.Directory != want {
			t.Errorf("s%d: %q, want %q (the oldest are forgotten)", i, ev.Directory, want)
		}
	}
}

// The session memory is bounded in bytes too: an id or a directory far
// longer than OpenCode's is not remembered.
func TestSessionMemoryIgnoresHugeIDs(t *testing.T) {
	p := opencode.NewSessionMemoryForTest(3)
	huge := strings.Repeat("x", 1<<20)
	_, _ = p([]byte(`{"type":"session.created","location":{"directory":"/d"},"data":{"sessionID":"` + huge + `"}}`))
	_, _ = p([]byte(`{"type":"session.created","location":{"directory":"/` + huge + `"},"data":{"sessionID":"s"}}`))
	for _, id := range []string{huge, "s"} {
		if ev, _ := p([]byte(`{"type":"session.execution.started","data":{"sessionID":"` + id + `"}}`)); ev.Directory != "" {
			t.Errorf("a session of a %d-byte id (or directory) was remembered", len(id))
		}
	}
}
