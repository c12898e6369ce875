package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A second `watch` for an OpenCode server that a running daemon of this
// user already watches (its URL spelt another way) refuses to start: it
// names the running daemon (pid, status address, URL) and exits 78 (the
// status the installed service is not restarted after), before it makes a
// single request. Two daemons would both reconnect every
// crashed MCP server. With --allow-duplicate the second one runs.
func TestSecondWatchForOneServerIsRefused(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		t.Setenv("XDG_STATE_HOME", t.TempDir()) // the daemons' registry, and status's
		oc := g.startOpenCode(t, 0, "")
		first := startWatch(t, oc, oc.Password)
		first.WaitLog(t, "watching opencode", 30*time.Second)

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		spelt := strings.Replace(oc.URL, "127.0.0.1", "localhost", 1) + "/"
		second := exec.CommandContext(ctx, reconnectBin, "watch", "--url", spelt, "--status-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		second.Env = append(os.Environ(), "OPENCODE_SERVER_PASSWORD="+oc.Password)
		out, err := second.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("the second watch ran (did not exit within 30 s):\n%s", out)
		}
		if code := second.ProcessState.ExitCode(); code != 78 || err == nil {
			t.Fatalf("the second watch exited %d, want 78:\n%s", code, out)
		}
		for _, want := range []string{"already watched", "pid " + strconv.Itoa(first.cmd.Process.Pid), first.StatusAddr, oc.URL, "--allow-duplicate"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("the refusal does not say %q:\n%s", want, out)
			}
		}
		if strings.Contains(string(out), oc.Password) {
			t.Error("the refusal shows the password")
		}

		// Insisting runs it: both are registered and answer.
		insisted := startWatch(t, oc, oc.Password, "--allow-duplicate")
		insisted.WaitLog(t, "watching opencode", 30*time.Second)
		status, err := exec.Command(reconnectBin, "status", "--json").Output()
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		var js struct {
			Daemons []struct {
				PID    int `json:"pid"`
				Status *struct {
					Servers []struct {
						URL string `json:"url"`
					} `json:"servers"`
				} `json:"status"`
			} `json:"daemons"`
		}
		if err := json.Unmarshal(status, &js); err != nil || len(js.Daemons) != 2 {
			t.Fatalf("status --json with --allow-duplicate: %v\n%s", err, status)
		}
		for _, d := range js.Daemons {
			if d.Status == nil || len(d.Status.Servers) != 1 || d.Status.Servers[0].URL != oc.URL {
				t.Errorf("daemon %d does not watch %s: %s", d.PID, oc.URL, status)
			}
		}
	})
}
