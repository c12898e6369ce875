package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A stdio server that crashes mid-session comes back through watch, and a
// directory nobody used is never touched.
func TestWatchRecoversCrashedStdioServer(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		const name = "echo srv/ü" // a space, a slash and a non-ASCII letter
		used := g.newProject(t, nil)
		used = rewriteProject(t, used, map[string]any{name: used.StdioServer(name)})
		idle := g.newProject(t, nil)
		idle = rewriteProject(t, idle, map[string]any{"idle": idle.StdioServer("idle")})

		w := startWatch(t, oc, oc.Password)
		w.WaitLog(t, "watching opencode", 15*time.Second)

		// A client uses the project: its MCP servers start.
		if st := oc.Status(t, used.Dir); st[name].Status != "connected" {
			t.Fatalf("before the crash: %+v", st)
		}
		pids := used.Starts(t, name)
		if len(pids) != 1 {
			t.Fatalf("server starts before the crash = %v, want 1", pids)
		}

		crashed := time.Now()
		killPID(t, pids[0])
		// The daemon repairs a first crash within a fraction of a second, so
		// a poll for "failed" can miss it: wait for the second process and
		// the daemon's own word instead.
		used.WaitStarts(t, name, 2, 30*time.Second)
		oc.WaitStatus(t, used.Dir, name, "connected", 30*time.Second)
		t.Logf("connected again %v after the kill", time.Since(crashed))
		if got := used.Starts(t, name); len(got) != 2 {
			t.Fatalf("server starts = %v, want a second process", got)
		}
		w.WaitLog(t, "reconnected MCP server", 10*time.Second)
		if !strings.Contains(w.Log.String(), "reason="+g.CrashEvent) {
			t.Fatalf("the directory was not armed by OpenCode's report of the crash (%s)", g.CrashEvent)
		}

		st := w.StatusJSON(t)
		if !strings.Contains(mustJSON(t, st), `"last_reconnect"`) {
			t.Fatalf("status shows no reconnect: %s", mustJSON(t, st))
		}
		out, err := exec.Command(reconnectBin, "status", "--status-addr", w.StatusAddr).CombinedOutput()
		if err != nil || !strings.Contains(string(out), name) || !strings.Contains(string(out), "connected") {
			t.Fatalf("status table: %v\n%s", err, out)
		}

		// The idle project was never touched: its server never started.
		if got := idle.Starts(t, "idle"); len(got) != 0 {
			t.Fatalf("a directory nobody used spawned %d MCP processes", len(got))
		}
		if strings.Contains(w.Log.String(), oc.Password) {
			t.Fatal("the password appears in the watcher's output")
		}
	})
}
