package procview

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// tcpListen is the kernel's TCP_LISTEN state in /proc/net/tcp{,6}.
const tcpListen = 0x0A

// ListeningSockets returns the inodes of the sockets listening on the TCP
// port at an address that 127.0.0.1 reaches: itself, the unspecified
// address (0.0.0.0, ::), or ::ffff:127.0.0.1.
func ListeningSockets(port int) (map[uint64]bool, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, err
	}
	return listeningSockets(fs, port), nil
}

func listeningSockets(fs procfs.FS, port int) map[uint64]bool {
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

// SocketOwner reports whether pid holds one of the sockets.
func SocketOwner(fs procfs.FS, pid int, sockets map[uint64]bool) bool {
	held, err := socketsOf(fs, pid)
	if err != nil {
		return false
	}
	for n := range held {
		if sockets[n] {
			return true
		}
	}
	return false
}

// socketsOf returns the inodes of the sockets process pid holds open.
func socketsOf(fs procfs.FS, pid int) (map[uint64]bool, error) {
	proc, err := fs.Proc(pid)
	if err != nil {
		return nil, err
	}
	targets, err := proc.FileDescriptorTargets()
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, t := range targets {
		if inode, ok := strings.CutPrefix(t, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(inode, "]"), 10, 64); err == nil {
				out[n] = true
			}
		}
	}
	return out, nil
}

// ListenAddrs returns the TCP addresses process pid listens on, sorted
// by port: the way from an OpenCode process to its server when nothing
// says its URL (an OpenCode 2 plugin knows its process, not its port).
// Only sockets of this network namespace are seen, the only ones a
// daemon here could reach.
func ListenAddrs(pid int) ([]netip.AddrPort, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, err
	}
	held, err := socketsOf(fs, pid)
	if err != nil {
		return nil, fmt.Errorf("the sockets of pid %d: %w", pid, err)
	}
	var out []netip.AddrPort
	for _, read := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, err := read()
		if err != nil {
			continue
		}
		for _, l := range lines {
			if l.St != tcpListen || !held[l.Inode] {
				continue
			}
			if a, ok := netip.AddrFromSlice(l.LocalAddr); ok {
				out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(l.LocalPort)))
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int {
		return cmp.Or(cmp.Compare(a.Port(), b.Port()), a.Addr().Compare(b.Addr()))
	})
	return slices.Compact(out), nil
}

// ListenerPID finds the process of user uid that listens on the loopback
// TCP port (an OpenCode that `watch` attaches to: its MCP children are
// then watched too). Only that user's processes are looked at: a file
// descriptor of another user's process cannot be read anyway.
func ListenerPID(port, uid int) (int, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	sockets := listeningSockets(fs, port)
	if len(sockets) == 0 {
		return 0, fmt.Errorf("nothing listens on port %d", port)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		st, err := p.NewStatus()
		if err != nil || len(st.UIDs) == 0 || st.UIDs[0] != uint64(uid) {
			continue
		}
		if SocketOwner(fs, p.PID, sockets) {
			return p.PID, nil
		}
	}
	return 0, ErrNotMine
}
