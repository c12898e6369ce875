package procview

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The group evidence (GroupOfGoneOpenCode) now asks that no process hold
// the group's id and, "when its end is on record", that the member
// started before OpenCode's recorded end (Sightings.End). A record
// whose end is not on record -- the machine was rebooted or lost power
// while OpenCode ran (the daemon died with it and never saw the end), the
// very record that outlives a boot in ~/.local/state -- proves every
// member of any later group with the recorded id whose leader has
// exited. That is the most common shape of a job that must be
// left alone: `setsid sh -c 'srv a &'`, `nohup srv a &` from a script, a
// shell job whose first process ended: the leader (sh) is gone, the
// server stays in its group, adopted by init. On a later boot pids start
// over, so the recorded OpenCode's pid is handed out again soon; such a
// job gets it, and doctor --reap ends it as an orphan of an OpenCode
// that ran on the boot before. A process of this boot cannot be a child
// of a process that started on the previous one, and nothing here looks.
func TestGroupOfAnOpenCodeFromAPreviousBootProvesNothing(t *testing.T) {
	boot := time.Unix(bootTime, 0)
	later := boot.Add(48 * time.Hour) // this boot; the record is from the one before
	tab := newMemTable(
		Process{PID: 1, PPID: 0, UID: 0, Birth: 1, Start: later, Comm: "init", Argv: []string{"/sbin/init"}, Cwd: "/"},
		// `setsid sh -c 'srv a &'`: sh (pid 2000, the recorded OpenCode's
		// pid) led group 2000 and exited; srv stays in that group.
		Process{PID: 3000, PPID: 1, PGID: 2000, UID: ana, Birth: 300, Start: later.Add(5 * time.Second), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
	)
	// goneOpenCode: pid 2000 leading group 2000, started a boot ago; no
	// daemon saw it end (the machine went down under it).
	r := Record{Dir: t.TempDir()}
	must(t, r.Save(Sightings{OpenCode: goneOpenCode, At: goneOpenCode.Start.Add(time.Hour), Boot: "the boot before"}))
	all, err := r.Load()
	must(t, err)
	kept := r.Prune(tab, all)
	s := Scope{UID: ana, Record: kept}
	got, err := Orphans(tab, simpleServers(), s)
	must(t, err)
	for _, o := range got {
		if !o.Evidence.Proven() {
			continue
		}
		t.Errorf("pid %d, started on this boot by a setsid job whose leader got pid 2000, is proven an orphan of OpenCode pid 2000 that ran on the previous boot: %v (%s)", o.PID, o.Evidence, o.Why)
		var log []sent
		reaper := Reaper{Table: tab, Scope: s, signal: fakeSignal(tab, &log, true)}
		if _, err := reaper.Reap(context.Background(), o); !errors.Is(err, ErrNotOrphan) {
			t.Errorf("Reap = %v; signals sent: %v", err, log)
		}
	}
}
