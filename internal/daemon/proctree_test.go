package daemon

import "testing"

// fakeProc is one process of a /proc tree written by writeProcTree.
type fakeProc struct {
	PID, PPID, UID int
	Start          uint64
	Argv           []string
	Cwd            string
}

// writeProcTree writes procs as a /proc tree under root (stat, status,
// cmdline, cwd, each process's children list), as procview's tests do,
// each process in its parent's pid's group.
func writeProcTree(t *testing.T, root string, procs []fakeProc) {
	t.Helper()
	grouped := make([]groupedProc, len(procs))
	for i, p := range procs {
		grouped[i] = groupedProc{PID: p.PID, PPID: p.PPID, PGID: p.PPID, UID: p.UID, Start: p.Start, Argv: p.Argv, Cwd: p.Cwd}
	}
	writeGroupedTree(t, root, grouped)
}
