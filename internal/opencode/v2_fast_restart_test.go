package opencode_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// Rule 8: OpenCode restarts are not stream hiccups.
// The stream re-detects the server (and so sees a new pid) only after an
// attempt that reached nobody. A 2.x service that restarts on the same port
// faster than the stream's first re-subscribe (about 0.5 s; a service
// manager restarting it, `opencode service restart`, an upgrade that
// replaces it) is never refused, never re-detected, and the new process
// is reported as the old one: the Server tells no watcher, the daemon
// re-reads every armed directory, and each read boots a location in the
// new process (its whole MCP fleet) that nobody may use any more. 2.x
// reports its pid in /api/info, so this restart can be told: the Server's
// OnChange says Replaced (never Gone: nothing refused) before the stream
// subscribes to the new process.
func TestFastRestartOfV2ServiceIsARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHosts(t)
		first := fake2.New(map[string]fakeopencode.Spec{"f": {}})
		h.Serve(hostA, first)
		s, _ := opencode.NewServer(opencode.ServerOptions{URL: "http://" + hostA, Client: opencode.Options{Password: fake2.DefaultPassword, Transport: h.Transport()}})
		var rec streamRecorder
		rec.run(t, s)
		time.Sleep(time.Second)
		first.Publish("/p", "session.created", map[string]any{}) // the stream delivers events for a while
		time.Sleep(time.Second)

		// The service restarts: a new process (new pid) on the same port,
		// up again before the stream's first retry.
		second := fake2.New(map[string]fakeopencode.Spec{"f": {}})
		second.SetPID(fake2.DefaultPID + 1)
		h.Serve(hostA, second)
		time.Sleep(10 * time.Second)
		synctest.Wait()

		connects, _ := rec.snapshot()
		if len(connects) != 2 {
			t.Fatalf("connects = %+v, want 2", connects)
		}
		if got, want := rec.timeline(), "connect replaced connect"; got != want {
			t.Errorf("re-subscribe to a new 2.x process (pid %d, was %d): told %q, want %q", fake2.DefaultPID+1, fake2.DefaultPID, got, want)
		}
	})
}
