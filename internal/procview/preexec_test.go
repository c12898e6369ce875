package procview

import (
	"testing"
	"time"
)

// OpenCode starts a server with
// fork (or vfork/posix_spawn) and exec: between the two the child is a
// copy of OpenCode, and /proc/PID/cmdline shows OpenCode's own argv
// ("opencode serve"), its comm "opencode", its cwd OpenCode's. A scan
// that reads the child in that window (View.Scan reads each new child
// once) takes it for the npm wrapper's native OpenCode binary
// (known.parent): settled() only re-reads an empty argv or npm's first
// title. The child is never read again: after its exec it runs the
// server, yet no snapshot ever lists it (a "parent" is in neither
// Servers nor Others), its crash is never reported, and its own
// children are taken for OpenCode's.
func TestAChildReadBeforeItsExecIsReadAgain(t *testing.T) {
	tab, oc := simpleTable()
	boot := time.Unix(bootTime, 0)
	// 103 is forked, not yet exec'd: a copy of OpenCode 100.
	tab.put(Process{PID: 103, PPID: 100, UID: ana, Birth: 10300, Start: boot.Add(103 * time.Second), Comm: "opencode", Argv: []string{"opencode", "serve"}, Cwd: "/p"})
	servers := append(simpleServers(), LocalServer{Directory: "/p", Name: "c", Command: []string{"srv", "c"}})
	v := newView(t, tab, oc, servers)
	scan(t, v)
	// It execs the server's command.
	tab.update(103, func(p *Process) { p.Comm, p.Argv = "srv", []string{"srv", "c"} })
	var s Snapshot
	for range 5 {
		s = scan(t, v)
	}
	if c, ok := s.Child(Key{"/p", "c"}); !ok || c.PID != 103 {
		t.Errorf("after its exec, pid 103 runs /p's server c, but the view does not see it serve c (servers %v, others %d): it was read once, as a copy of OpenCode, and taken for OpenCode itself", keysOf(s), len(s.Others))
	}
}

func keysOf(s Snapshot) []Key {
	var ks []Key
	for k := range s.Servers {
		ks = append(ks, k)
	}
	return ks
}
