package launch

import (
	"os"
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"golang.org/x/sys/unix"
)

// sysProcAttr makes the kernel send the child SIGTERM if the wrapper dies,
// so a killed wrapper leaves no OpenCode behind. (Start forks from a
// locked thread so that "the wrapper dies" is what triggers it.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// saveTerminal records f's terminal modes and returns what puts them back;
// a no-op when f is not a terminal.
func saveTerminal(f *os.File) func() {
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, t) }
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
	for _, p := range descendants(fs, pid) {
		if procview.SocketOwner(fs, p, listeners) {
			return false
		}
	}
	return true
}

// descendants lists pid and every live process below it.
func descendants(fs procfs.FS, pid int) []int {
	children := map[int][]int{}
	procs, _ := fs.AllProcs()
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue
		}
		children[st.PPID] = append(children[st.PPID], p.PID)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}
