package launch

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

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
// child's start. A port nobody listens on yet is not taken.
func PortTaken(pid, port int) bool {
	listeners := listenerInodes(port)
	if len(listeners) == 0 {
		return false
	}
	for _, p := range descendants(pid) {
		fds, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p), "fd"))
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "fd", fd.Name()))
			if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok && listeners[strings.TrimSuffix(inode, "]")] {
				return false
			}
		}
	}
	return true
}

// listenerInodes finds the sockets listening on port at an address that
// conflicts with 127.0.0.1 (itself, 0.0.0.0, ::, ::ffff:127.0.0.1).
func listenerInodes(port int) map[string]bool {
	conflicting := map[string]bool{
		"0100007F": true, "00000000": true,
		"00000000000000000000000000000000": true, "0000000000000000FFFF00000100007F": true,
	}
	out := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr, hexPort, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(hexPort, 16, 16); err != nil || int(p) != port || !conflicting[addr] {
				continue
			}
			out[fields[9]] = true
		}
		f.Close()
	}
	return out
}

// descendants lists pid and every live process below it.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}
