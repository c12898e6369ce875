package procview

import (
	"slices"
	"testing"
	"time"
)

// viewOfOne is OpenCode 2000 with one child, 2100, serving /p's a.
func viewOfOne(t *testing.T) (*memTable, *View) {
	boot := time.Unix(bootTime, 0)
	tab := newMemTable(
		Process{PID: 2000, PPID: 1, PGID: 2000, UID: ana, Birth: 2000, Start: boot, Comm: "opencode", Argv: []string{"opencode", "serve"}, Cwd: "/p"},
		Process{PID: 2100, PPID: 2000, PGID: 2000, UID: ana, Birth: 2100, Start: boot.Add(time.Minute), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
	)
	v := newView(t, tab, 2000, simpleServers())
	if c, ok := scan(t, v).Child(Key{"/p", "a"}); !ok || c.PID != 2100 {
		t.Fatalf("child %+v %v", c, ok)
	}
	return tab, v
}

// An exit an exit watcher saw counts at the next scan, though OpenCode
// still lists the child (a zombie it has not reaped yet); the word of a
// watcher about another process with that pid does not.
func TestViewCountsAWatchedExitBeforeOpenCodeReapsIt(t *testing.T) {
	tab, v := viewOfOne(t)
	prev := scan(t, v)
	v.Exited(2100, 9999, time.Now()) // another process's birth
	if _, ok := scan(t, v).Child(Key{"/p", "a"}); !ok {
		t.Fatal("an exit of another process with the same pid ended the child")
	}
	tab.update(2100, func(p *Process) { p.Zombie = true })
	v.Exited(2100, 2100, time.Now())
	next := scan(t, v)
	if _, ok := next.Child(Key{"/p", "a"}); ok {
		t.Fatal("the child an exit watcher saw exit still serves")
	}
	if ev := describe(prev, next); !slices.Equal(ev, []string{"exited a 2100"}) {
		t.Fatalf("events %v", ev)
	}
	if _, ok := scan(t, v).Child(Key{"/p", "a"}); ok {
		t.Fatal("the zombie serves again at the scan after")
	}
}

// Successor reads the table now: a child OpenCode started after the one
// that exited is its successor; an older one (a duplicate) is not.
func TestViewSuccessorReadsTheTableNow(t *testing.T) {
	tab, v := viewOfOne(t)
	boot := time.Unix(bootTime, 0)
	const exitedBirth = 2150 // born after 2100, before 2200
	if v.Successor("/p", "a", exitedBirth) {
		t.Fatal("the older child counts as a successor")
	}
	tab.put(Process{PID: 2200, PPID: 2000, PGID: 2000, UID: ana, Birth: 2200, Start: boot.Add(3 * time.Minute), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"})
	if !v.Successor("/p", "a", exitedBirth) {
		t.Fatal("a child started since is no successor")
	}
	if v.Successor("/p", "b", exitedBirth) {
		t.Fatal("a successor of another server")
	}
}
