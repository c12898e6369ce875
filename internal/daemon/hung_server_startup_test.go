package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// Run detects every server one after the other, each for up to
// 5 s, before any engine, stream or the status API starts. A server that
// accepts connections and never answers (a hung OpenCode) listed first
// delays every other server by 5 s each (N hung servers: N×5 s), and the
// status API with them. Server two's failed MCP server should get its
// first connect at initial-delay (1 s), as it would alone.
func TestHungServerDoesNotDelayTheOthersStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hung := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", AfterConnect: "connected"}})
		v2.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve("hung-1:4096", hung)
		hosts.Serve("hung-2:4096", hung)
		hosts.Serve(host2, v2)
		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		cfg := Config{
			Servers: []Target{
				{URL: "http://hung-1:4096", Transport: hosts.Transport()},
				{URL: "http://hung-2:4096", Transport: hosts.Transport()},
				{URL: "http://" + host2, Password: fake2.DefaultPassword, Directories: []string{"/b"}, Transport: hosts.Transport()},
			},
			Engine: ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteConnect, "/b", "b"); n == 0 {
			t.Fatal("3 s after start, server two's failed MCP server got no connect: Run is still detecting the hung servers listed before it (5 s each)")
		}
	})
}

// An OpenCode that starts after the daemon: the daemon says once that it
// waits for it, and once that it watches it when it answers (the user who
// read the first line learns that it caught up).
func TestOpenCodeThatStartsLaterIsSaidToBeWatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		logs := &logBuffer{}
		cfg := Config{
			Servers: []Target{{URL: "http://" + host2, Password: fake2.DefaultPassword, Transport: hosts.Transport()}},
			Engine:  reconnect.DefaultConfig, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil))) }()
		defer func() {
			cancel()
			<-done
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if !strings.Contains(logs.String(), "opencode not reachable yet") || strings.Contains(logs.String(), `msg="watching opencode"`) {
			t.Fatalf("before OpenCode answers:\n%s", logs)
		}
		hosts.Serve(host2, fake2.New(nil))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := strings.Count(logs.String(), `msg="watching opencode"`); n != 1 || !strings.Contains(logs.String(), "generation=2.x") {
			t.Fatalf("once OpenCode answers, the daemon said it watches it %d times (want once, with its generation):\n%s", n, logs)
		}
	})
}
