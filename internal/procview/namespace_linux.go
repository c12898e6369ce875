package procview

import (
	"errors"
	"fmt"
)

// verifyListener checks, through t's /proc tree, that pid is in the pid
// namespace of that tree (its NSpid ends with pid) and holds a socket
// listening on the loopback port.
func verifyListener(t Table, pid, port int) error {
	pt, ok := t.(*procTable)
	if !ok {
		return fmt.Errorf("pid %d: this process table does not show sockets: %w", pid, errors.ErrUnsupported)
	}
	proc, err := pt.fs.Proc(pid)
	if err != nil {
		return fmt.Errorf("pid %d is no process here: %w", pid, ErrNotServer)
	}
	st, err := proc.NewStatus()
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	// NSpid lists the process's pid in the namespace of this /proc, then
	// in each nested one; a kernel before 4.1 has no such line.
	if n := len(st.NSpids); n > 1 && st.NSpids[n-1] != uint64(pid) {
		return fmt.Errorf("pid %d here is pid %d in its own pid namespace (a container), so it is not the server that reported %d: %w",
			pid, st.NSpids[n-1], pid, ErrNotServer)
	}
	sockets := listeningSockets(pt.fs, port)
	if len(sockets) == 0 {
		return fmt.Errorf("nothing listens on loopback port %d in this network namespace: %w", port, ErrNotServer)
	}
	if !SocketOwner(pt.fs, pid, sockets) {
		return fmt.Errorf("pid %d does not hold the socket listening on port %d: another process serves it (a proxy such as docker-proxy or ssh -L, or an OpenCode in another pid namespace): %w",
			pid, port, ErrNotServer)
	}
	return nil
}
