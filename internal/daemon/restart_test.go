package daemon

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// Rule 8: from the moment OpenCode refuses connections (it is
// restarting) every directory is forgotten, and stays forgotten until a
// later event arms it. The event stream sees the refusal first (here at
// 10 s); the engine must learn it from the stream then, not from its own
// next refused call or the stream's next successful subscribe (up to 36 s
// later): a directory whose check falls after OpenCode is back, but before
// the stream tries again, would read the new process and re-create its
// instance and every MCP server it configures, for a directory nobody
// uses.
func TestRestartSeenByTheStreamForgetsDirectoriesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		specs := map[string]fakeopencode.Spec{"s": {}}
		old := fakeopencode.New(specs)
		old.Password = "pw"
		old.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve(host1, old)
		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		ec.IdleInterval = 10 * time.Minute
		cfg := Config{
			Servers: []Target{{URL: "http://" + host1, Password: "pw", Transport: hosts.Transport()}},
			Engine:  ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		old.Publish("/p", "session.updated", nil) // a client uses /p: armed, checked at 2 s
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if old.Count("/mcp", "/p", "") != 1 {
			t.Fatalf("setup: /p not checked once (%d)", old.Count("/mcp", "/p", ""))
		}

		// OpenCode stops at 10 s: the stream's re-subscribes are refused
		// from then on; /p has no check due until 602 s.
		time.Sleep(7 * time.Second)
		hosts.Stop(host1)
		// It is back (a new process, no instance) just before /p's check.
		time.Sleep(start.Add(601*time.Second + 900*time.Millisecond).Sub(time.Now()))
		fresh := fakeopencode.New(specs)
		fresh.Password = "pw"
		fresh.SetHeartbeat(10 * time.Second)
		hosts.Serve(host1, fresh)
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if n := fresh.Count("/mcp", "/p", ""); n != 0 || len(fresh.Instances()) != 0 {
			t.Fatalf("the restarted OpenCode got %d status reads of /p (instances now %v) although no event armed /p after the restart; the stream had seen it refuse connections for %v",
				n, fresh.Instances(), 590*time.Second)
		}
	})
}

// The news also arrives on another path: an OpenCode 2 service replaced
// on the same port within one backoff step is refused by nobody, but its
// new pid, read when the stream looks at once after its drop, makes the
// engine forget every directory armed in the old process.
func TestReplacedServiceSeenByItsPidForgetsDirectories(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		specs := map[string]fakeopencode.Spec{"s": {}}
		old := fake2.New(specs)
		old.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve(host2, old)
		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		ec.IdleInterval = 10 * time.Minute
		cfg := Config{
			Servers: []Target{{URL: "http://" + host2, Password: fake2.DefaultPassword, Transport: hosts.Transport()}},
			Engine:  ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		old.Boot("/p") // a session there
		old.Publish("/p", "session.created", map[string]any{"sessionID": "ses_1"})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if old.Count(fake2.RouteMCP, "/p", "") == 0 {
			t.Fatal("setup: /p was not checked in the old service")
		}
		fresh := fake2.New(specs)
		fresh.PID = old.PID + 1
		fresh.SetHeartbeat(10 * time.Second)
		hosts.Serve(host2, fresh) // replaced at once: no request is ever refused
		time.Sleep(15 * time.Minute)
		synctest.Wait()
		if n := fresh.Count(fake2.RouteMCP, "/p", ""); n != 0 {
			t.Fatalf("the replacing service got %d status reads of /p, armed only in the old one", n)
		}
	})
}
