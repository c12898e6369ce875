package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// Rule 8 ("whatever sees a refusal or a new
// process ... forgets the armed directories at once"), for the OpenCode 2
// background service, the way most 2.x users run it. A service that exits
// cleanly removes its service.json; from then on the event stream's every
// look is Discover failing with fs.ErrNotExist, which Server.Detect returns
// without a request to the known URL and observe() ignores (neither an
// answer nor a refusal). So no Gone reaches the engine for the whole gap,
// although the service's port refuses connections: a directory whose idle
// check falls after the next service listens on the same port (49374 is
// fixed), before the stream's next look (up to 5 s later), reads the new
// process and boots its location, and every MCP server it configures, for
// a directory nobody uses. A service file that is gone is the strongest
// "gone" there is.
func TestServiceCleanExitForgetsDirectories(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		saved := followRetry
		followRetry = backoff.Policy{Initial: 500 * time.Millisecond, Max: 5 * time.Second} // no jitter: a fixed schedule
		defer func() { followRetry = saved }()

		file := filepath.Join(t.TempDir(), "opencode", "service.json")
		specs := map[string]fakeopencode.Spec{"s": {}}
		hosts := fakeopencode.NewHosts()
		old := fake2.New(specs)
		old.SetHeartbeat(10 * time.Second)
		hosts.Serve(host2, old)
		writeServiceJSON(t, file, "http://"+host2, old.PID, fake2.DefaultPassword)

		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		ec.IdleInterval = 10 * time.Minute
		cfg := Config{
			// ServiceServer, through the in-memory hosts.
			Servers: []Target{followService(file, false, nil, hosts.Transport())},
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
		old.Boot("/p")
		old.Publish("/p", "session.created", map[string]any{"sessionID": "ses_1"}) // armed; checked at 2 and 3 s, next at 603 s
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if old.Count(fake2.RouteMCP, "/p", "") == 0 {
			t.Fatal("setup: /p was not checked in the old service")
		}

		// The service stops at 591 s (opencode service restart, or a newer
		// CLI replacing it): its port refuses from then on, and it removes
		// its service.json at the clean exit, as OpenCode 2 does.
		time.Sleep(start.Add(591 * time.Second).Sub(time.Now()))
		hosts.Stop(host2)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		// A new service listens on the same port at 602 s (the stream looks at 591, 591.5, 592.5, 594.5, 598.5, 603.5 s) and registers.
		time.Sleep(start.Add(602 * time.Second).Sub(time.Now()))
		fresh := fake2.New(specs)
		fresh.PID = old.PID + 1
		fresh.SetHeartbeat(10 * time.Second)
		hosts.Serve(host2, fresh)
		writeServiceJSON(t, file, "http://"+host2, fresh.PID, fake2.DefaultPassword)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := fresh.Count(fake2.RouteMCP, "/p", ""); n != 0 {
			t.Fatalf("the new service got %d status reads of /p (locations %v), armed only in the old one, although the old service had exited (file removed, port refusing) 11 s before",
				n, fresh.Instances())
		}
	})
}
