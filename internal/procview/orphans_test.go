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
	got, err := Orphans(pt, syntheticServers(), Scope{UID: ana, Watched: []int{2000}, Record: record})
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
	got, err := Orphans(tab, servers, Scope{UID: ana})
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
	got, err := Orphans(tab, simpleServers(), Scope{UID: ana})
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

// A process that ignores SIGTERM gets SIGKILL after the grace.
func TestReapKillAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab, o := simpleOrphanTable()
		var log []sent
		start := time.Now()
		r := Reaper{Table: tab, Scope: Scope{UID: ana}, Grace: 3 * time.Second, signal: fakeSignal(tab, &log, false)}
		res, err := r.Reap(context.Background(), o)
		if err != nil || res.Signal != syscall.SIGKILL || !slices.Equal(log, []sent{{3000, syscall.SIGTERM}, {3000, syscall.SIGKILL}}) {
			t.Fatalf("reap = %+v, %v; sent %v", res, err, log)
		}
		if d := time.Since(start); d < 3*time.Second || d > 3200*time.Millisecond {
			t.Fatalf("SIGKILL came %v after the start, want the 3 s grace", d)
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
