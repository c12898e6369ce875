package procview

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// evidenceTable holds a process 3000 running a configured server's
// command, adopted by init, and nothing of its OpenCode (2000, gone): the
// tests add the evidence.
func evidenceTable(pgid int) *memTable {
	boot := time.Unix(bootTime, 0)
	return newMemTable(
		Process{PID: 1, PPID: 0, UID: 0, Birth: 1, Start: boot, Comm: "init", Argv: []string{"/sbin/init"}, Cwd: "/"},
		Process{PID: 3000, PPID: 1, PGID: pgid, UID: ana, Birth: 3000, Start: boot.Add(time.Hour), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
	)
}

var (
	goneOpenCode = Ident{PID: 2000, Birth: 2000, Start: time.Unix(bootTime, 0).Add(time.Minute), PGID: 2000}
	seen3000     = Sighting{Ident: Ident{PID: 3000, Birth: 3000, Start: time.Unix(bootTime, 0).Add(time.Hour), PGID: 2000}, Parent: goneOpenCode, Directory: "/p", Server: "a"}
)

func orphanOf(t *testing.T, tab *memTable, s Scope) Orphan {
	t.Helper()
	got, err := Orphans(tab, simpleServers(), s)
	if err != nil || len(got) != 1 {
		t.Fatalf("orphans = %+v, %v", got, err)
	}
	return got[0]
}

// The record proves an orphan whatever its group and environment (the
// v2 line puts nothing in them; under run OpenCode does not lead its
// group): this very process served a server under an OpenCode that is
// gone. Another process with its pid, or an OpenCode that runs again
// under the same identity, proves nothing.
func TestOrphanProvenByTheRecord(t *testing.T) {
	tab := evidenceTable(1234) // the wrapper's group, its leader gone
	record := []Sightings{{OpenCode: goneOpenCode, Boot: testBoot, Seen: []Sighting{seen3000}}}
	o := orphanOf(t, tab, Scope{UID: ana, Record: record})
	if o.Evidence != SeenUnderOpenCode || !strings.Contains(o.Why, "under OpenCode pid 2000") {
		t.Fatalf("evidence %v: %s", o.Evidence, o.Why)
	}

	reused := seen3000
	reused.Birth++ // the record saw another process with pid 3000
	o = orphanOf(t, tab, Scope{UID: ana, Record: []Sightings{{OpenCode: goneOpenCode, Boot: testBoot, Seen: []Sighting{reused}}}})
	if o.Evidence.Proven() {
		t.Fatalf("a sighting of another process with the same pid proved it: %s", o.Why)
	}

	tab.put(Process{PID: 2000, PPID: 1, PGID: 2000, UID: ana, Birth: 2000, Start: goneOpenCode.Start, Comm: "opencode"})
	o = orphanOf(t, tab, Scope{UID: ana, Record: record})
	if o.Evidence.Proven() || !strings.Contains(o.Why, "still runs") {
		t.Fatalf("seen under an OpenCode that runs: %v %s", o.Evidence, o.Why)
	}
}

// A process still in the group a recorded OpenCode led, that OpenCode
// gone, is its orphan; one that started before that OpenCode did is not.
func TestOrphanProvenByTheGroupOfARecordedOpenCode(t *testing.T) {
	tab := evidenceTable(2000)
	record := []Sightings{{OpenCode: goneOpenCode, Boot: testBoot}}
	if o := orphanOf(t, tab, Scope{UID: ana, Record: record}); o.Evidence != GroupOfGoneOpenCode {
		t.Fatalf("evidence %v: %s", o.Evidence, o.Why)
	}
	tab.update(3000, func(p *Process) {
		p.Birth, p.Start = goneOpenCode.Birth-1, goneOpenCode.Start.Add(-10*time.Millisecond)
	})
	if o := orphanOf(t, tab, Scope{UID: ana, Record: record}); o.Evidence.Proven() {
		t.Fatalf("a process older than the OpenCode whose group it is in: %v %s", o.Evidence, o.Why)
	}
}

// OPENCODE_PID proves an orphan only together with the group: a process
// started from inside an OpenCode session (its bash tool) carries the
// variable too, and setsid or a service manager gives it a group of its
// own.
func TestOrphanProvenByItsEnvironmentOnlyInOpenCodesGroup(t *testing.T) {
	tab := evidenceTable(2000)
	tab.setEnv(3000, "OPENCODE_PID", "2000")
	if o := orphanOf(t, tab, Scope{UID: ana}); o.Evidence != EnvOfGoneOpenCode {
		t.Fatalf("evidence %v: %s", o.Evidence, o.Why)
	}
	tab.update(3000, func(p *Process) { p.PGID = 3000 }) // setsid
	o := orphanOf(t, tab, Scope{UID: ana})
	if o.Evidence.Proven() || !strings.Contains(o.Why, "left that process group") {
		t.Fatalf("a setsid process with OPENCODE_PID: %v %s", o.Evidence, o.Why)
	}
	for _, v := range []string{"", "1", "x", "-5"} {
		tab.update(3000, func(p *Process) { p.PGID = 2000 })
		tab.setEnv(3000, "OPENCODE_PID", v)
		if o := orphanOf(t, tab, Scope{UID: ana}); o.Evidence.Proven() {
			t.Fatalf("OPENCODE_PID=%q proved it: %s", v, o.Why)
		}
	}
}

// What runs below a proven orphan is ended with it: a shell that dies on
// SIGTERM leaves its sleeping child. A process below it that is another
// one by the time of the signal is left alone.
func TestReapEndsWhatRunsBelowTheOrphan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := evidenceTable(2000)
		tab.setEnv(3000, "OPENCODE_PID", "2000")
		boot := time.Unix(bootTime, 0)
		tab.put(Process{PID: 3001, PPID: 3000, PGID: 2000, UID: ana, Birth: 3001, Start: boot.Add(time.Hour), Comm: "node", Argv: []string{"node", "x"}})
		tab.put(Process{PID: 3002, PPID: 3001, PGID: 2000, UID: ana, Birth: 3002, Start: boot.Add(time.Hour), Comm: "sleep", Argv: []string{"sleep", "600"}})
		o := orphanOf(t, tab, Scope{UID: ana})
		if len(o.Below) != 2 {
			t.Fatalf("below %+v", o.Below)
		}
		var log []sent
		r := Reaper{Table: tab, Scope: Scope{UID: ana}, Confirm: func(Orphan) bool {
			tab.update(3002, func(p *Process) { p.Birth++ }) // 3002 exited; its pid went to another process
			return true
		}, signal: fakeSignal(tab, &log, true)}
		res, err := r.Reap(context.Background(), o)
		if err != nil || res.Signal != syscall.SIGTERM || res.Below != 1 {
			t.Fatalf("reap = %+v, %v", res, err)
		}
		if !slices.Equal(log, []sent{{3000, syscall.SIGTERM}, {3001, syscall.SIGTERM}}) {
			t.Fatalf("sent %v", log)
		}
	})
}

// A process below another that is listed is not listed again on its own.
func TestOrphansListATreeOnceAtItsTop(t *testing.T) {
	tab := evidenceTable(2000)
	boot := time.Unix(bootTime, 0)
	// the server (same command) below the left-over launcher, itself
	// adopted: its parent is the launcher, so it is no candidate anyway;
	// a second adopted copy below a subreaper child of 3000 is.
	tab.put(Process{PID: 3001, PPID: 3000, PGID: 2000, UID: ana, Birth: 3001, Start: boot.Add(time.Hour), Comm: "systemd", Argv: []string{"systemd", "--user"}})
	tab.put(Process{PID: 3002, PPID: 3001, PGID: 2000, UID: ana, Birth: 3002, Start: boot.Add(time.Hour), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"})
	got, err := Orphans(tab, simpleServers(), Scope{UID: ana})
	if err != nil || len(got) != 1 || got[0].PID != 3000 || len(got[0].Below) != 2 {
		t.Fatalf("orphans %+v, %v", got, err)
	}
}

// Under run, the wrapper leads OpenCode's process group (the terminal's
// job) and holds nothing else in it: with both gone, a process still in
// that group is OpenCode's, though no scan saw it. The record of such an
// OpenCode is kept while its group has a live process.
func TestOrphanProvenByTheGroupOfTheRunWrapper(t *testing.T) {
	tab := evidenceTable(1900)
	oc := Ident{PID: 2000, Birth: 2000, Start: goneOpenCode.Start, PGID: 1900}
	wrapper := Ident{PID: 1900, Birth: 1900, Start: goneOpenCode.Start.Add(-time.Second), PGID: 1900}
	record := []Sightings{{OpenCode: oc, Leader: wrapper, Boot: testBoot}}
	if o := orphanOf(t, tab, Scope{UID: ana, Record: record}); o.Evidence != GroupOfGoneOpenCode {
		t.Fatalf("evidence %v: %s", o.Evidence, o.Why)
	}
	if o := orphanOf(t, tab, Scope{UID: ana, Record: []Sightings{{OpenCode: oc, Boot: testBoot}}}); o.Evidence.Proven() {
		t.Fatalf("a group led by nobody recorded (a shell's job) proved it: %s", o.Why)
	}
	tab.put(Process{PID: 1900, PPID: 1, PGID: 1900, UID: ana, Birth: 1900, Start: wrapper.Start, Comm: "mcp-reconnect"})
	if o := orphanOf(t, tab, Scope{UID: ana, Record: record}); o.Evidence.Proven() {
		t.Fatalf("the wrapper still runs, yet its group proved it: %s", o.Why)
	}

	r := Record{Dir: t.TempDir()}
	must(t, r.Save(record[0]))
	tab.remove(1900)
	if kept := r.Prune(tab, record); len(kept) != 1 {
		t.Fatal("the record of a group with a live process was pruned")
	}
	tab.remove(3000)
	if kept := r.Prune(tab, record); len(kept) != 0 {
		t.Fatal("the record of a group with no live process was kept")
	}
}
