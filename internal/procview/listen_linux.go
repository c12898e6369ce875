package procview

import (
	"errors"
	"fmt"
	"net"
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
	proc, err := fs.Proc(pid)
	if err != nil {
		return false
	}
	targets, _ := proc.FileDescriptorTargets()
	for _, t := range targets {
		if inode, ok := strings.CutPrefix(t, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(inode, "]"), 10, 64); err == nil && sockets[n] {
				return true
			}
		}
	}
	return false
}

// ErrNotMine: what listens on the port is no process of the user asked
// about (ListenerPID).
var ErrNotMine = errors.New("the process listening on the port is not this user's")

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
