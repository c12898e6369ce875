package launch

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
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
	listeners := listenerInodes(fs, port)
	if len(listeners) == 0 {
		return false
	}
	for _, p := range descendants(fs, pid) {
		proc, err := fs.Proc(p)
		if err != nil {
			continue
		}
		targets, _ := proc.FileDescriptorTargets()
		for _, t := range targets {
			if inode, ok := strings.CutPrefix(t, "socket:["); ok {
				if n, err := strconv.ParseUint(strings.TrimSuffix(inode, "]"), 10, 64); err == nil && listeners[n] {
					return false
				}
			}
		}
	}
	return true
}

// tcpListen is the kernel's TCP_LISTEN state in /proc/net/tcp{,6}.
const tcpListen = 0x0A

// listenerInodes finds the sockets listening on port at an address that
// conflicts with 127.0.0.1: itself, the unspecified address (0.0.0.0,
// ::), or ::ffff:127.0.0.1.
func listenerInodes(fs procfs.FS, port int) map[uint64]bool {
	out := map[uint64]bool{}
	for _, read := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, err := read()
		if err != nil {
			continue
		}
		for _, l := range lines {
			if l.St != tcpListen || l.LocalPort != uint64(port) {
				continue
			}
			if l.LocalAddr.IsUnspecified() || l.LocalAddr.Equal(net.IPv4(127, 0, 0, 1)) {
				out[l.Inode] = true
			}
		}
	}
	return out
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
