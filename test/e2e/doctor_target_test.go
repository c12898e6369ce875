package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// doctor with no --url checks the OpenCode the running daemon watches
// (found in the registry of running daemons), says so in its first line,
// and authenticates with the password it is given; the daemon, stopped
// with SIGTERM, says so in one line that names the signal.
func TestDoctorChecksTheRunningDaemonsOpenCode(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		t.Setenv("XDG_STATE_HOME", t.TempDir()) // the daemon's registry, and doctor's
		oc := g.startOpenCode(t, 0, "")
		w := startWatch(t, oc, oc.Password)
		w.WaitLog(t, "watching opencode", 30*time.Second)

		cmd := exec.Command(reconnectBin, "doctor", "--config", "", "--json")
		for _, kv := range os.Environ() {
			if name, _, _ := strings.Cut(kv, "="); name != "OPENCODE_URL" && !strings.HasPrefix(name, "MCP_RECONNECT_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "OPENCODE_SERVER_PASSWORD="+oc.Password)
		out, _ := cmd.Output()
		var checks []struct{ Severity, Name, Detail string }
		if err := json.Unmarshal(out, &checks); err != nil || len(checks) == 0 {
			t.Fatalf("doctor --json: %v\n%s", err, out)
		}
		want := fmt.Sprintf("%s: watched by the running mcp-reconnect daemon pid %d (no --url or $OPENCODE_URL given)", oc.URL, w.cmd.Process.Pid)
		if c := checks[0]; c.Name != "target" || c.Severity != "info" || c.Detail != want {
			t.Errorf("doctor's first line %+v, want the target %q", c, want)
		}
		got := map[string]string{}
		for _, c := range checks {
			got[c.Name] = c.Severity
		}
		if got["reachable"] != "ok" || got["authenticated"] != "ok" {
			t.Errorf("doctor on the daemon's OpenCode: reachable %q, authenticated %q\n%s", got["reachable"], got["authenticated"], out)
		}
		if strings.Contains(string(out), oc.Password) {
			t.Error("doctor printed the password")
		}

		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			t.Fatal("watch did not stop within 10 s of SIGTERM")
		}
		if n := strings.Count(w.Log.String(), `level=INFO msg="stopping: signal received" signal=SIGTERM`); n != 1 {
			t.Errorf("%d lines name SIGTERM, want one:\n%s", n, w.Log)
		}
	})
}
