package daemon

import (
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// A crash is the end of the child OpenCode started (its launcher) and of
// what runs below it, which OpenCode's pipe sees. Below a launcher that
// runs on (`sh -c 'node srv.js; sleep 600'`, or a build step before the
// server: `sh -c 'npm run build; node dist/index.js'`) the end of one
// process is not: the next one holds OpenCode's pipe, and nothing in the
// process table tells a build step that ended from a server that
// crashed. So it is shown (status names what runs below the launcher
// now) and nothing is done; the launcher's own end is a crash. Here
// without an exit watcher: scans alone.
func TestOnlyTheLaunchersEndIsACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		cmd := []string{"sh", "-c", "node srv.js; sleep 600"}
		root := t.TempDir()
		writeProcTree(t, root, underOpenCode(uid,
			fakeProc{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: cmd, Cwd: "/p"},
			fakeProc{PID: 2101, PPID: 2100, UID: uid, Start: 201, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
		))
		oc := &connectedOC{cmd: cmd}
		r, tab := connectedEngine(t, root, oc)
		defer r.stop()

		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Servers) != 1 || info.Servers[0].ServerPID != 2101 {
			t.Fatalf("setup: status does not show node 2101 below the shell: %+v", info)
		}

		// node crashes; the shell goes on to `sleep 600`.
		removeProcs(t, root, 2101)
		writeProcTree(t, root, []fakeProc{{PID: 2102, PPID: 2100, UID: uid, Start: 900, Argv: []string{"sleep", "600"}, Cwd: "/p"}})
		setChildren(t, root, 2100, "2102 ")
		time.Sleep(60 * time.Second)
		synctest.Wait()
		n := oc.connectCount()
		if n != 0 {
			t.Errorf("%d connects after node (pid 2101) ended below `sh -c 'node srv.js; sleep 600'`: the shell runs on and holds OpenCode's pipe, as it would after a build step", n)
		}
		if info := p.info(); info == nil || len(info.Servers) != 1 || info.Servers[0].ServerPID != 2102 {
			t.Errorf("status does not show what runs below the shell now (sleep, pid 2102): %+v", info)
		}

		// The launcher ends: that is a crash.
		removeProcs(t, root, 2100, 2102)
		setChildren(t, root, 2000, "")
		time.Sleep(60 * time.Second)
		synctest.Wait()
		n = oc.connectCount()
		if n == 0 {
			t.Errorf("the launcher (pid 2100) ended a minute ago while OpenCode says connected: no connect")
		}
	})
}
