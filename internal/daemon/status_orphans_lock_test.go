package daemon

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// stallTable is a process table whose Read of one pid blocks until
// released: a process whose /proc/PID/cmdline read hangs (its memory
// map lock held by a task stuck in D state, on a hung NFS mount), or
// just a slow read of a large table.
type stallTable struct {
	procview.Table
	pid     int
	release chan struct{}
	once    sync.Once
	entered chan struct{}
}

func (s *stallTable) Read(pid int) (procview.Process, error) {
	if pid == s.pid {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.Table.Read(pid)
}

// status looks for orphans (every
// 10 s) inside procWatch.info with p.mu held: findOrphans ("Caller holds
// p.mu") reads the whole process table, the argv and cwd of every
// adopted process of the machine, and loads and parses the record from
// disk. p.mu is the lock the exit watcher's callback, the watch loop
// and Successor take: while status reads, no exit is reported, no scan
// runs, and the engine's decision on a dead child (which asks Successor
// synchronously, in its check) waits. A read that is slow (10,000
// processes, an 8 MiB record) stalls them all; one that hangs (a
// cmdline read of a process stuck in D state) hangs the process view
// and that directory's check for good, from one `mcp-reconnect status`.
func TestStatusLookingForOrphansDoesNotStallTheExitPath(t *testing.T) {
	uid := os.Getuid()
	root := t.TempDir()
	writeProcTree(t, root, underOpenCode(uid,
		fakeProc{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
		// some daemon of the user's, adopted by init: Orphans reads it
		fakeProc{PID: 3000, PPID: 1, UID: uid, Start: 50, Argv: []string{"syncthing", "serve"}, Cwd: "/home/ana"},
	))
	tab := &stallTable{Table: procFS(t, root), pid: 3000, release: make(chan struct{}), entered: make(chan struct{})}
	r := newWatchRig()
	p := r.newWatch(t, 2000)
	p.table = tab
	r.goWatch(p, tab, 2000)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(tab.release) }) }
	defer func() { release(); r.stop() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		up := !p.last.At.IsZero()
		p.mu.Unlock()
		if up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("setup: the watch never scanned")
		}
		time.Sleep(10 * time.Millisecond)
	}

	go p.info() // mcp-reconnect status
	<-tab.entered

	done := make(chan bool, 1)
	go func() { done <- p.Successor("/p", "s", 0) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Errorf("the engine's Successor question waited 2 s (and waits on) for a status call reading the process table for orphans with the watch's lock held")
	}
}
