package procview

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// The synthetic machine's orphans: the ones init and systemd --user
// adopted, and the child of an OpenCode nobody watches (listed, never
// reaped); not another user's process, not one ana runs from her shell,
// not a zombie, not the watched OpenCode's. Of the adopted ones, only the
// one the record holds (seen under an OpenCode that is gone) is proven:
// the other is in the group of its parent, systemd --user, like a user
// service.
func TestOrphansSynthetic(t *testing.T) {
	pt := openTable(t, filepath.Join("testdata", "synthetic"))
	boot := time.Unix(bootTime, 0)
	gone := Ident{PID: 1500, Birth: 40000, Start: boot.Add(400 * time.Second), PGID: 1500}
	record := []Sightings{{OpenCode: gone, Boot: testBoot, Seen: []Sighting{
		{Ident: Ident{PID: 3000, Birth: 50000, Start: boot.Add(500 * time.Second), PGID: 1}, Parent: gone, Directory: project, Server: "my server"},
	}}}
	got, err := Orphans(pt, configured(syntheticServers()), Scope{UID: ana, Watched: []int{2000}, Record: record})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, o := range got {
		lines = append(lines, fmt.Sprintf("%d %v, %v: %v %s", o.PID, o.Parentage, o.Evidence, o.Servers, o.Command))
	}
	want := []string{
		"3000 reparented to init, seen under an OpenCode that is gone: [{/home/ana/my projéct my server}] node srv.js --name 'café au lait'",
		"3001 reparented to a subreaper, not proven: [{/home/ana/other dir gh}] node /usr/bin/npx -y @modelcontextprotocol/server-github",
		"4001 child of an OpenCode that is not watched, not proven: [{/home/ana/my projéct my server}] node srv.js --name 'café au lait'",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("orphans\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if why := got[1].Why; !strings.Contains(why, "no daemon saw it") || !strings.Contains(why, "process group 900") {
		t.Errorf("why 3001 is not proven: %q", why)
	}
}

// An orphan whose working directory is no configured server's place is
// matched by its command alone, against every server that runs it.
func TestOrphanElsewhereMatchesByCommand(t *testing.T) {
	tab, _ := simpleOrphanTable()
	tab.update(3000, func(p *Process) { p.Cwd = "/somewhere/else" })
	servers := append(simpleServers(), LocalServer{Directory: "/q", Name: "a", Command: []string{"srv", "a"}})
	got, err := Orphans(tab, configured(servers), Scope{UID: ana})
	if err != nil || len(got) != 1 || !slices.Equal(got[0].Servers, []Key{{"/p", "a"}, {"/q", "a"}}) {
		t.Fatalf("orphans %+v, %v", got, err)
	}
}

// simpleOrphanTable holds one orphan, 3000, adopted by init, left by
// OpenCode 2000 (gone): still in the group 2000 led, with OPENCODE_PID
// naming it; and what Orphans lists for it.
func simpleOrphanTable() (*memTable, Orphan) {
	boot := time.Unix(bootTime, 0)
	tab := newMemTable(
		Process{PID: 1, PPID: 0, UID: 0, Birth: 1, Start: boot, Comm: "init", Argv: []string{"/sbin/init"}, Cwd: "/"},
		Process{PID: 3000, PPID: 1, PGID: 2000, UID: ana, Birth: 3000, Start: boot.Add(time.Minute), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
	)
	tab.setEnv(3000, "OPENCODE_PID", "2000")
	got, err := Orphans(tab, configured(simpleServers()), Scope{UID: ana})
	if err != nil || len(got) != 1 || got[0].Evidence != EnvOfGoneOpenCode {
		panic(fmt.Sprint(got, err))
	}
	return tab, got[0]
}

type sent struct {
	pid int
	sig syscall.Signal
}

// fakeSignal records signals; termEnds says whether SIGTERM ends the
// process (30 ms later).
func fakeSignal(tab *memTable, log *[]sent, termEnds bool) func(int, syscall.Signal, func() error) error {
	return func(pid int, sig syscall.Signal, verify func() error) error {
		if err := verify(); err != nil {
			return err
		}
		*log = append(*log, sent{pid, sig})
		if sig == syscall.SIGKILL || termEnds {
			go func() {
				time.Sleep(30 * time.Millisecond)
				tab.update(pid, func(p *Process) { p.Zombie = true })
			}()
		}
		return nil
	}
}

// SIGTERM that works: one signal, no SIGKILL.
func TestReapTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab, o := simpleOrphanTable()
		var log []sent
		asked := 0
		r := Reaper{Table: tab, Scope: Scope{UID: ana}, Confirm: func(Orphan) bool { asked++; return true }, signal: fakeSignal(tab, &log, true)}
		res, err := r.Reap(context.Background(), o)
		if err != nil || res.Signal != syscall.SIGTERM || asked != 1 || !slices.Equal(log, []sent{{3000, syscall.SIGTERM}}) {
			t.Fatalf("reap = %+v, %v; asked %d; sent %v", res, err, asked, log)
		}
		if res.After < 30*time.Millisecond || res.After > 100*time.Millisecond {
			t.Fatalf("ended after %v", res.After)
		}
	})
}

// A process that ignores SIGTERM gets SIGKILL after the grace, 5 s.
func TestReapKillAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab, o := simpleOrphanTable()
		var log []sent
		start := time.Now()
		r := Reaper{Table: tab, Scope: Scope{UID: ana}, signal: fakeSignal(tab, &log, false)}
		res, err := r.Reap(context.Background(), o)
		if err != nil || res.Signal != syscall.SIGKILL || !slices.Equal(log, []sent{{3000, syscall.SIGTERM}, {3000, syscall.SIGKILL}}) {
			t.Fatalf("reap = %+v, %v; sent %v", res, err, log)
		}
		if d := time.Since(start); d < 5*time.Second || d > 5200*time.Millisecond {
			t.Fatalf("SIGKILL came %v after the start, want the 5 s grace", d)
		}
	})
}

// Nothing is sent to a process that is not, right before the signal,
// the orphan that was listed.
func TestReapRefuses(t *testing.T) {
	for name, change := range map[string]func(*memTable){
		"pid reused": func(m *memTable) { m.update(3000, func(p *Process) { p.Birth++ }) },
		"adopted by a shell": func(m *memTable) {
			m.put(Process{PID: 77, PPID: 1, Comm: "bash", Birth: 77})
			m.update(3000, func(p *Process) { p.PPID = 77 })
		},
		"another user's":     func(m *memTable) { m.update(3000, func(p *Process) { p.UID = 0 }) },
		"runs another thing": func(m *memTable) { m.update(3000, func(p *Process) { p.Argv = []string{"vim"} }) },
		"child of an opencode": func(m *memTable) {
			m.put(Process{PID: 88, PPID: 1, Comm: "opencode", Birth: 88})
			m.update(3000, func(p *Process) { p.PPID = 88 })
		},
		"its opencode is back": func(m *memTable) {
			m.put(Process{PID: 2000, PPID: 1, PGID: 2000, Comm: "opencode", Birth: 2000})
		},
		"it left the group": func(m *memTable) { m.update(3000, func(p *Process) { p.PGID = 3000 }) },
		"no evidence left":  func(m *memTable) { m.setEnv(3000, "OPENCODE_PID", "") },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tab, o := simpleOrphanTable()
				var log []sent
				asked := 0
				r := Reaper{Table: tab, Scope: Scope{UID: ana}, Confirm: func(Orphan) bool { asked++; change(tab); return true },
					signal: fakeSignal(tab, &log, true)}
				_, err := r.Reap(context.Background(), o)
				if len(log) != 0 {
					t.Fatalf("sent %v", log)
				}
				if !errors.Is(err, ErrNotOrphan) {
					t.Fatalf("err = %v", err)
				}
			})
		})
	}
}

// An orphan that exits by itself before the signal is no error, and gets
// no signal.
func TestReapExitedByItself(t *testing.T) {
	for name, change := range map[string]func(*memTable){
		"zombie": func(m *memTable) { m.update(3000, func(p *Process) { p.Zombie = true }) },
		"gone":   func(m *memTable) { m.remove(3000) },
	} {
		tab, o := simpleOrphanTable()
		var log []sent
		r := Reaper{Table: tab, Scope: Scope{UID: ana}, Confirm: func(Orphan) bool { change(tab); return true }, signal: fakeSignal(tab, &log, true)}
		if res, err := r.Reap(context.Background(), o); err != nil || res.Signal != 0 || len(log) != 0 {
			t.Errorf("%s: %+v, %v, sent %v", name, res, err, log)
		}
	}
}

// A declined orphan is left alone; so is one of another user even when
// the caller says it is theirs.
func TestReapDeclinedAndOtherUser(t *testing.T) {
	tab, o := simpleOrphanTable()
	var log []sent
	r := Reaper{Table: tab, Scope: Scope{UID: ana}, Confirm: func(Orphan) bool { return false }, signal: fakeSignal(tab, &log, true)}
	if _, err := r.Reap(context.Background(), o); !errors.Is(err, ErrDeclined) || len(log) != 0 {
		t.Fatalf("declined: %v, sent %v", err, log)
	}
	r = Reaper{Table: tab, Scope: Scope{UID: 0}, signal: fakeSignal(tab, &log, true)}
	if _, err := r.Reap(context.Background(), o); !errors.Is(err, ErrNotOrphan) || len(log) != 0 {
		t.Fatalf("other user: %v, sent %v", err, log)
	}
	hand := o
	hand.cmd = nil // an Orphan not made by Orphans
	r = Reaper{Table: tab, Scope: Scope{UID: ana}, signal: fakeSignal(tab, &log, true)}
	if _, err := r.Reap(context.Background(), hand); !errors.Is(err, ErrNotOrphan) || len(log) != 0 {
		t.Fatalf("hand-made orphan: %v, sent %v", err, log)
	}
}

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
	got, err := Orphans(tab, configured(simpleServers()), s)
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
		if err != nil || res.Signal != syscall.SIGTERM {
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
	got, err := Orphans(tab, configured(simpleServers()), Scope{UID: ana})
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
	got, err := Orphans(tab, configured(simpleServers()), s)
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
	got, err := Orphans(tab, configured(simpleServers()), s)
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
	got, err = Orphans(tab, configured(simpleServers()), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range got {
		if o.Evidence.Proven() {
			t.Errorf("pid %d, in a new group 2000 whose live leader is not the recorded OpenCode, is proven an orphan: %v (%s)", o.PID, o.Evidence, o.Why)
		}
	}
}

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
		got, err := Orphans(tab, configured(simpleServers()), Scope{UID: ana})
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

// zombieOpenCode is OpenCode 2000 killed and not yet reaped by its
// parent: still in the table, state Z, leading its group 2000. Its
// children were handed to init at its exit.
func zombieOpenCode() Process {
	return Process{PID: 2000, PPID: 1999, PGID: 2000, UID: ana, Zombie: true, Birth: goneOpenCode.Birth, Start: goneOpenCode.Start, Comm: "opencode"}
}

// A zombie runs nothing: an OpenCode killed and not yet reaped by its
// parent (a shell that is busy, a supervisor that waits later) is gone
// for every piece of evidence. Its OPENCODE_PID proves the orphan, and so
// does the group it led, and the reaper ends the orphan.
func TestOrphanOfAZombieOpenCodeIsProven(t *testing.T) {
	withEnv := func(tab *memTable) { tab.setEnv(3000, "OPENCODE_PID", "2000") }
	for name, c := range map[string]struct {
		evidence func(*memTable)
		record   []Sightings
		want     Evidence
		words    string
	}{
		"OPENCODE_PID": {withEnv, nil, EnvOfGoneOpenCode, "OpenCode pid 2000 (its OPENCODE_PID and its process group), which is gone"},
		"group":        {nil, []Sightings{{OpenCode: goneOpenCode, Boot: testBoot}}, GroupOfGoneOpenCode, "process group of OpenCode pid 2000"},
		"record":       {nil, []Sightings{{OpenCode: goneOpenCode, Boot: testBoot, Seen: []Sighting{seen3000}}}, SeenUnderOpenCode, "under OpenCode pid 2000"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tab := evidenceTable(2000)
				if c.evidence != nil {
					c.evidence(tab)
				}
				tab.put(zombieOpenCode())
				s := Scope{UID: ana, Record: c.record}
				o := orphanOf(t, tab, s)
				if o.Evidence != c.want || !strings.Contains(o.Why, c.words) {
					t.Fatalf("the orphan of a zombie OpenCode: %v (%s), want %v", o.Evidence, o.Why, c.want)
				}
				var log []sent
				r := Reaper{Table: tab, Scope: s, signal: fakeSignal(tab, &log, true)}
				if res, err := r.Reap(context.Background(), o); err != nil || res.Signal != syscall.SIGTERM || !slices.Equal(log, []sent{{3000, syscall.SIGTERM}}) {
					t.Fatalf("reap = %+v, %v; sent %v", res, err, log)
				}
			})
		})
	}
}

// A zombie proves only what its identity proves. In the group of a
// recorded OpenCode, the zombie that holds the group's id must be that
// very OpenCode (or its run wrapper): a zombie with the id is otherwise
// the leader of a new group that got the pid after the recorded one was
// gone (a setsid job of a later boot whose shell exited). And a zombie
// OpenCode reaped during the scan leaves the orphan proven all the same.
func TestZombieAtTheGroupIDProvesOnlyAsTheRecordedLeader(t *testing.T) {
	tab := evidenceTable(2000)
	record := []Sightings{{OpenCode: goneOpenCode, Boot: testBoot}}
	other := zombieOpenCode()
	other.Birth, other.Start, other.Comm = 2500, goneOpenCode.Start.Add(30*time.Minute), "sh"
	tab.put(other)
	if o := orphanOf(t, tab, Scope{UID: ana, Record: record}); o.Evidence.Proven() {
		t.Fatalf("a zombie that is not the recorded OpenCode, at its group's id, proved it: %v (%s)", o.Evidence, o.Why)
	}

	// OPENCODE_PID: the process at that pid while the orphan is in its
	// group can only be the leader that made the group (its pid cannot
	// be handed out while the group exists), zombie or not; reaped by
	// now, it is gone as well.
	tab.setEnv(3000, "OPENCODE_PID", "2000")
	for _, step := range []func(){func() { tab.put(zombieOpenCode()) }, func() { tab.remove(2000) }} {
		step()
		if o := orphanOf(t, tab, Scope{UID: ana}); o.Evidence != EnvOfGoneOpenCode {
			t.Fatalf("evidence %v (%s)", o.Evidence, o.Why)
		}
	}

	// A live OpenCode at that pid still runs: never proven.
	live := zombieOpenCode()
	live.Zombie = false
	tab.put(live)
	if o := orphanOf(t, tab, Scope{UID: ana}); o.Evidence.Proven() || !strings.Contains(o.Why, "still runs") {
		t.Fatalf("the child of a live OpenCode: %v (%s)", o.Evidence, o.Why)
	}
}

// Races at the edge of proof. The zombie OpenCode that leads the
// orphan's group is reaped between the listing and the signal: the
// reaper's check right before the signal finds the group's id free, and
// the orphan still proven. A record from a previous boot, whose pid and
// birth a zombie of this boot has (pids and ticks start over), proves
// nothing: the zombie started on this boot, so it is not the recorded
// OpenCode, and that OpenCode ran before this boot began.
func TestZombieOpenCodeReapedMidwayOrOfAnotherBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := evidenceTable(2000)
		tab.put(zombieOpenCode())
		s := Scope{UID: ana, Record: []Sightings{{OpenCode: goneOpenCode, Boot: testBoot}}}
		o := orphanOf(t, tab, s)
		if o.Evidence != GroupOfGoneOpenCode {
			t.Fatalf("evidence %v (%s)", o.Evidence, o.Why)
		}
		tab.remove(2000) // its parent reaped it meanwhile
		var log []sent
		r := Reaper{Table: tab, Scope: s, signal: fakeSignal(tab, &log, true)}
		if res, err := r.Reap(context.Background(), o); err != nil || res.Signal != syscall.SIGTERM || !slices.Equal(log, []sent{{3000, syscall.SIGTERM}}) {
			t.Fatalf("reap = %+v, %v; sent %v", res, err, log)
		}
	})

	tab := evidenceTable(2000)
	tab.bootID = "another boot" // the record is of testBoot
	tab.put(zombieOpenCode())   // pid 2000 with the recorded birth, of this boot
	for name, record := range map[string][]Sightings{
		"group":  {{OpenCode: goneOpenCode, Boot: testBoot}},
		"record": {{OpenCode: goneOpenCode, Boot: testBoot, Seen: []Sighting{seen3000}}},
	} {
		if o := orphanOf(t, tab, Scope{UID: ana, Record: record}); o.Evidence.Proven() {
			t.Errorf("%s: a record of the previous boot proved a process of this one through a zombie with its pid: %v (%s)", name, o.Evidence, o.Why)
		}
	}
}
