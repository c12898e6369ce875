package daemon

import (
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// Every exit of a server's child now goes to the engine, and the engine
// asks Successor(after = the start of the child that exited) at decision
// time. But ChildExited keeps only the start of the last exit it was told
// (s.deadStart = started), not of the newest child that exited. When the
// newest child, the one OpenCode talks to, crashes and an older leaked
// duplicate exits before the check (the user follows status's advice to
// end the older one, or it dies with the crash), deadStart becomes that
// older start, and any duplicate between the two passes for a
// successor: the crash is never repaired.
func TestAnOlderDuplicatesExitAfterTheNewestCrashedHidesNoCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		writeProcTree(t, root, underOpenCode(uid,
			fakeProc{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"}, // leaked duplicates
			fakeProc{PID: 2101, PPID: 2000, UID: uid, Start: 300, Argv: srv, Cwd: "/p"},
			fakeProc{PID: 2102, PPID: 2000, UID: uid, Start: 400, Argv: srv, Cwd: "/p"}, // the one serving
		))
		oc := &connectedOC{cmd: srv}
		r, tab := connectedEngine(t, root, oc)
		defer r.stop()

		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Duplicates) != 1 {
			t.Fatalf("setup: the duplicates are not shown: %+v", info)
		}
		// The newest child crashes (its exit is seen at once, as an exit
		// watcher sees it).
		removeProcs(t, root, 2102)
		setChildren(t, root, 2000, "2100 2101 ")
		p.view.Load().Look()
		time.Sleep(250 * time.Millisecond)
		synctest.Wait()
		// A moment later, within the 0.5 s grace, the oldest duplicate
		// ends too.
		removeProcs(t, root, 2100)
		setChildren(t, root, 2000, "2101 ")
		p.view.Load().Look()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		n := oc.connectCount()
		if n == 0 {
			t.Errorf("the newest child (2102), the one OpenCode talks to, crashed 30 s ago while OpenCode says connected: no connect, because the exit of the oldest duplicate (2100) after it made the older duplicate 2101 pass for its successor")
		}
	})
}
