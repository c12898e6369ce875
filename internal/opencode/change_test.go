package opencode_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

const changeHost = "127.0.0.1:4096"

// changes records what a Server tells its watchers, with the (fake) time.
type changes struct {
	mu  sync.Mutex
	got []opencode.Change
	at  []time.Time
}

func (c *changes) add(ch opencode.Change, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ch)
	c.at = append(c.at, time.Now())
}

func (c *changes) list() []opencode.Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]opencode.Change(nil), c.got...)
}

func newWatchedServer(t *testing.T, hosts *fakeopencode.Hosts, password string) (*opencode.Server, *changes) {
	t.Helper()
	s, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + changeHost,
		Client: opencode.Options{Password: password, Transport: hosts.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	c := &changes{}
	s.OnChange(c.add)
	return s, c
}

// A refused request makes the server Gone once, whoever made it, and the
// next answer makes it Replaced: rule 8's news reaches every watcher from
// whichever path saw it first.
func TestServerToldGoneOnceAndReplacedOnNextAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		hosts.Serve(changeHost, fakeopencode.New(map[string]fakeopencode.Spec{"s": {}}))
		s, c := newWatchedServer(t, hosts, "")
		ctx := context.Background()
		if _, err := s.MCPStatus(ctx, "/p"); err != nil {
			t.Fatal(err)
		}
		if got := c.list(); len(got) != 0 {
			t.Fatalf("changes before any refusal: %v", got)
		}
		hosts.Stop(changeHost)
		_, _ = s.MCPStatus(ctx, "/p") // a status read is refused
		_ = s.Connect(ctx, "/p", "s") // so is a connect
		_, _ = s.MCPConfig(ctx, "/p") // and a config read
		if got := c.list(); len(got) != 1 || got[0] != opencode.Gone {
			t.Fatalf("changes after three refused requests = %v, want [gone] once", got)
		}
		hosts.Serve(changeHost, fakeopencode.New(map[string]fakeopencode.Spec{"s": {}}))
		if err := s.Connect(ctx, "/p", "s"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MCPStatus(ctx, "/p"); err != nil {
			t.Fatal(err)
		}
		if got := c.list(); len(got) != 2 || got[1] != opencode.Replaced {
			t.Fatalf("changes after OpenCode answered again = %v, want [gone replaced]", got)
		}
	})
}

// A 2.x service replaced within one backoff step is refused by nobody:
// its new pid, seen by the next detection, makes it Replaced.
func TestServerReplacedWhenThePidChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		old := fake2.New(map[string]fakeopencode.Spec{"s": {}})
		hosts.Serve(changeHost, old)
		s, c := newWatchedServer(t, hosts, fake2.DefaultPassword)
		ctx := context.Background()
		if _, _, err := s.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.list(); len(got) != 0 {
			t.Fatalf("changes while the same process answers: %v", got)
		}
		fresh := fake2.New(map[string]fakeopencode.Spec{"s": {}})
		fresh.PID = old.PID + 1
		hosts.Serve(changeHost, fresh)
		if _, _, err := s.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.list(); len(got) != 1 || got[0] != opencode.Replaced {
			t.Fatalf("changes after the pid changed = %v, want [replaced]", got)
		}
	})
}

// When the event stream ends because OpenCode died, the watchers learn it
// at once, not a backoff step (up to 30 s) later when the stream tries
// again: a directory checked in between would read the next process.
func TestStreamDropToldAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		fake := fakeopencode.New(map[string]fakeopencode.Spec{"s": {}})
		fake.SetHeartbeat(10 * time.Second)
		hosts.Serve(changeHost, fake)
		s, c := newWatchedServer(t, hosts, "")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		up := make(chan struct{}, 8)
		go func() {
			defer close(done)
			_ = s.Stream(ctx, opencode.StreamOptions{OnConnect: func(opencode.Connected) { up <- struct{}{} }}, func(opencode.Event) {})
		}()
		<-up
		time.Sleep(time.Minute) // a stable stream: the next backoff step is 0.5 s, the one after grows
		stopped := time.Now()
		hosts.Stop(changeHost)
		synctest.Wait()
		c.mu.Lock()
		got, at := append([]opencode.Change(nil), c.got...), append([]time.Time(nil), c.at...)
		c.mu.Unlock()
		cancel()
		<-done
		if len(got) != 1 || got[0] != opencode.Gone || at[0].Sub(stopped) > 0 {
			t.Fatalf("changes after OpenCode stopped = %v at %v (stopped at %v), want [gone] at once", got, at, stopped)
		}
	})
}
