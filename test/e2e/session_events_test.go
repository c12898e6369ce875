package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// Every session event of a turn, as the daemon's client reads the stream,
// names the session's directory: a client's activity arms its directory.
// On 2.1.2 the execution events (session.execution.*) and
// session.usage.updated carry no location on the wire: the client gives
// them the directory their session was seen in.
func TestSessionEventsOfATurnNameTheirDirectory(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		m := newFakeModel(t, "s")
		oc := g.start(t, ochost.Options{Env: m.Env(g)})
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		oc.Status(t, p.Dir)
		oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)
		srv, err := opencode.NewServer(opencode.ServerOptions{URL: oc.URL, Client: opencode.Options{Password: oc.Password}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var seen []opencode.Event
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.Stream(ctx, opencode.StreamOptions{}, func(ev opencode.Event) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, ev)
			})
		}()
		t.Cleanup(func() { cancel(); <-done })
		waitFor(t, 20*time.Second, "the stream up", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) > 0
		})
		time.Sleep(userPause)
		c := newChat(t, oc, p.Dir)
		if err := c.Echo(t, p, m, "one"); err != "" {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the turn's last events
		mu.Lock()
		defer mu.Unlock()
		var types []string
		for _, ev := range seen {
			if ev.Kind != opencode.KindActivity {
				continue
			}
			if !slices.Contains(types, ev.Type) {
				types = append(types, ev.Type)
			}
			if ev.Directory != p.Dir {
				t.Errorf("%s names directory %q, not the session's %q", ev.Type, ev.Directory, p.Dir)
			}
		}
		t.Logf("session events of the turn: %v", types)
		if len(types) < 2 {
			t.Fatalf("session events of a turn: %v, want the session's and its turn's", types)
		}
	})
}
