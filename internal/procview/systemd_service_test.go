package procview

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A process that systemd --user started (a user service, or
// `systemd-run --user`), running the same command as a configured local
// server, was never OpenCode's child: its parent is its first and only
// parent, and it leads its own process group and session (systemd
// setsid()s every service). Its parent's name proves nothing, and neither
// Orphans nor the Reaper's last check may take it for an orphan.
func TestReaperSparesAServiceStartedBySystemd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boot := time.Unix(bootTime, 0)
		tab := newMemTable(
			Process{PID: 1, PPID: 0, UID: 0, PGID: 1, Birth: 1, Start: boot, Comm: "systemd", Argv: []string{"/sbin/init"}, Cwd: "/"},
			// the user's service manager
			Process{PID: 900, PPID: 1, UID: ana, PGID: 900, Birth: 900, Start: boot.Add(time.Second), Comm: "systemd", Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Cwd: "/home/ana"},
			// a user service it started: own process group, never had another parent
			Process{PID: 3000, PPID: 900, UID: ana, PGID: 3000, Birth: 3000, Start: boot.Add(time.Minute), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
		)
		got, err := Orphans(tab, simpleServers(), Scope{UID: ana})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range got {
			if o.Evidence.Proven() {
				t.Errorf("pid %d, started by systemd --user as a service (its own process group), is a proven orphan: %s", o.PID, o.Why)
			}
		}
		if len(got) == 0 {
			return
		}
		var log []sent
		r := Reaper{Table: tab, Scope: Scope{UID: ana}, signal: fakeSignal(tab, &log, true)}
		if _, err := r.Reap(context.Background(), got[0]); err == nil || len(log) > 0 {
			t.Fatalf("Reap sent %v to a service systemd --user started (err %v)", log, err)
		}
	})
}
