package daemon

import (
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// When a child serving a server
// exits and another child of the same server still runs, the watch
// reports nothing ("Another child still serves it (OpenCode already
// started a new one, or a duplicate was ended)"). But the child left
// may be the *older* one: a duplicate OpenCode leaked earlier (status
// and doctor list it as such), no longer connected to anything. OpenCode
// talks to its newest child; when that one crashes, 1.14 keeps saying
// connected, and the leaked duplicate's survival hides the crash: the
// server is never brought back. Only a child that started after the one
// that exited can be its successor (as Successor itself asks).
func TestCrashOfTheNewestChildIsNotHiddenByAnOlderDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		writeProcTree(t, root, underOpenCode(uid,
			fakeProc{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"}, // leaked duplicate
			fakeProc{PID: 2101, PPID: 2000, UID: uid, Start: 300, Argv: srv, Cwd: "/p"}, // the one serving
		))
		oc := &connectedOC{cmd: srv}
		r, tab := connectedEngine(t, root, oc)
		defer r.stop()

		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Duplicates) != 1 {
			t.Fatalf("setup: the duplicate is not shown: %+v", info)
		}
		// The serving child, the newest, crashes; the leaked one lives on.
		removeProcs(t, root, 2101)
		setChildren(t, root, 2000, "2100 ")
		time.Sleep(30 * time.Second)
		synctest.Wait()
		n := oc.connectCount()
		if n == 0 {
			t.Errorf("the newest child (2101), the one OpenCode talks to, exited 30 s ago while OpenCode says connected: no connect, because an older leaked duplicate (2100) still runs")
		}
	})
}
