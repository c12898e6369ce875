package procview

import (
	"context"
	"errors"
	"testing"
	"time"
)

// "A kill needs proof, not a parent
// pid", and a reused pid is never to be hit. The group evidence
// (GroupOfGoneOpenCode) asks only that the process's group id equal the
// recorded OpenCode's, that the OpenCode and the group's leader are not
// alive *as the recorded processes*, and that the process started after
// that OpenCode. A pid is not handed out again while a group of that id
// exists, but once OpenCode's group is empty (its servers ended with it,
// or the machine rebooted: the record lives in ~/.local/state) the pid is
// free, and whatever gets it next and leads a group (every service,
// setsid and nohup job, every shell job does) makes a new group with the
// same id. That new group passes every test: its leader is another
// process than the recorded one, so "not alive"; it started after the
// old OpenCode, of course. Record.Prune keeps the file meanwhile, since
// it asks only whether some group with that id has a live process.
//
// Here a user service (parent: the user's systemd, a subreaper) that runs
// a configured server's command got pid 2000 on a later boot: the pid a
// recorded OpenCode had. It is "proven" an orphan of that OpenCode and
// doctor --reap ends it: exactly the user service that must be
// left alone. A member of a new group 2000 whose leader is alive (another
// process than the recorded OpenCode) is "proven" too.
func TestGroupOfAGoneOpenCodeNeverProvesANewGroupWithItsID(t *testing.T) {
	boot := time.Unix(bootTime, 0)
	later := boot.Add(48 * time.Hour) // a later boot: pids start over
	tab := newMemTable(
		Process{PID: 1, PPID: 0, UID: 0, Birth: 1, Start: boot, Comm: "init", Argv: []string{"/sbin/init"}, Cwd: "/"},
		Process{PID: 900, PPID: 1, PGID: 900, UID: ana, Birth: 90, Start: later, Comm: "systemd", Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Cwd: "/"},
		// the service: pid 2000 (the old OpenCode's), its own group
		Process{PID: 2000, PPID: 900, PGID: 2000, UID: ana, Birth: 200, Start: later.Add(time.Second), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
	)
	record := []Sightings{{OpenCode: goneOpenCode, Boot: testBoot}} // pid 2000, group 2000
	r := Record{Dir: t.TempDir()}
	must(t, r.Save(record[0]))
	kept := r.Prune(tab, record)
	s := Scope{UID: ana, Record: kept}
	got, err := Orphans(tab, simpleServers(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range got {
		if o.Evidence.Proven() {
			t.Errorf("pid %d, a service that took the pid of recorded OpenCode 2000 and leads its own group, is proven an orphan: %v (%s)", o.PID, o.Evidence, o.Why)
			var log []sent
			reaper := Reaper{Table: tab, Scope: s, signal: fakeSignal(tab, &log, true)}
			if _, err := reaper.Reap(context.Background(), o); !errors.Is(err, ErrNotOrphan) {
				t.Errorf("Reap = %v; signals sent: %v", err, log)
			}
		}
	}

	// A new group 2000 whose leader runs: a process in it (adopted by
	// init) is no member of the old OpenCode's group either.
	tab.remove(2000)
	tab.put(Process{PID: 2000, PPID: 1, PGID: 2000, UID: ana, Birth: 200, Start: later.Add(time.Second), Comm: "sh", Argv: []string{"sh", "-c", "srv a & sleep 1d"}, Cwd: "/p"})
	tab.put(Process{PID: 3000, PPID: 1, PGID: 2000, UID: ana, Birth: 300, Start: later.Add(2 * time.Second), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"})
	got, err = Orphans(tab, simpleServers(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range got {
		if o.Evidence.Proven() {
			t.Errorf("pid %d, in a new group 2000 whose live leader is not the recorded OpenCode, is proven an orphan: %v (%s)", o.PID, o.Evidence, o.Why)
		}
	}
}
