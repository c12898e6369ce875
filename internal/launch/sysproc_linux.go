package launch

import (
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// sysProcAttr makes the kernel send the child SIGTERM if the wrapper dies,
// so a killed wrapper leaves no OpenCode behind. (Start forks from a
// locked thread so that "the wrapper dies" is what triggers it.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// PortTaken reports whether a process other than pid (and its
// descendants) listens on the loopback port, so that pid can never bind
// it: another program took the port between the wrapper's choice and the
// child's start. A port nobody listens on yet is not taken, and neither is
// one whose listeners cannot be read (no /proc).
func PortTaken(pid, port int) bool {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return false
	}
	listeners, err := procview.ListeningSockets(port)
	if err != nil || len(listeners) == 0 {
		return false
	}
	t, err := procview.System()
	if err != nil {
		return false
	}
	ps, _ := t.List()
	children := map[int][]int{}
	for _, p := range ps {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	// pid, then every live process below it.
	for tree := []int{pid}; len(tree) > 0; tree = append(tree[1:], children[tree[0]]...) {
		if procview.SocketOwner(fs, tree[0], listeners) {
			return false
		}
	}
	return true
}
