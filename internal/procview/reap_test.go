package procview

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// In a container pid 1 is often OpenCode itself, and its live MCP
// servers have parent 1: when the caller says pid 1 is the OpenCode it
// watches, they are no orphans, and the Reaper's last check before the
// signal lets nothing through.
func TestReaperSparesTheLiveServerOfOpenCodeAsPID1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boot := time.Unix(bootTime, 0)
		tab := newMemTable(
			Process{PID: 1, PPID: 0, UID: ana, Birth: 1, Start: boot, Comm: "opencode", Argv: []string{"/usr/local/bin/opencode", "serve"}, Cwd: "/p"},
			Process{PID: 30, PPID: 1, UID: ana, PGID: 1, Birth: 30, Start: boot.Add(time.Second), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
		)
		scope := Scope{UID: ana, Watched: []int{1}} // the daemon watches OpenCode, pid 1
		got, err := Orphans(tab, configured(simpleServers()), scope)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range got {
			if o.Evidence.Proven() {
				t.Errorf("pid %d, a live server of the watched OpenCode (pid 1), proven an orphan: %s", o.PID, o.Why)
			}
		}
		if len(got) == 0 {
			return
		}
		var log []sent
		r := Reaper{Table: tab, Scope: scope, signal: fakeSignal(tab, &log, true)}
		if _, err := r.Reap(context.Background(), got[0]); err == nil || len(log) > 0 {
			t.Fatalf("Reap sent %v to a live server of the watched OpenCode (err %v)", log, err)
		}
	})
}
