package procview

import (
	"errors"
	"fmt"
)

// ErrNotMine: what listens on the port is no process of the user asked
// about (ListenerPID).
var ErrNotMine = errors.New("the process listening on the port is not this user's")

// ErrNotServer is VerifyServerPID's answer for a pid that is not the
// server's here: no such process, another user's, a process that is
// another one in its own pid namespace, or one that does not hold the
// listening socket.
var ErrNotServer = errors.New("not the process serving that port here")

// VerifyServerPID checks that pid, which an OpenCode 2 server reported
// as its own (GET /api/info), names that server in this daemon's process
// table t: a live process of user uid, in this pid namespace (Linux: its
// NSpid, the pids it has in each nested namespace, ends with pid, so the
// process would report pid itself), that holds a socket listening on the
// loopback TCP port the server is reached at. A server in a container
// reports the pid of its own namespace, which here is some other process
// (pid 1, or a process of this user's that happens to have that number);
// a port published by docker-proxy, ssh -L or socat is held by the proxy.
// Either way, that pid's children are not the server's MCP processes.
//
// The error matches ErrNotServer when the pid is not the server's, and
// errors.ErrUnsupported when t cannot tell which process listens on a
// port (macOS, without cgo; or a Table not backed by a /proc tree): then
// only the process and its owner were checked (macOS has no pid
// namespaces), and the caller decides.
func VerifyServerPID(t Table, pid, port, uid int) error {
	if pid <= 0 {
		return fmt.Errorf("pid %d: %w", pid, ErrNotServer)
	}
	p, err := t.Read(pid)
	if errors.Is(err, ErrGone) {
		return fmt.Errorf("pid %d is no process here: the server runs in another pid namespace (a container) or has exited: %w", pid, ErrNotServer)
	}
	if err != nil {
		return err
	}
	if p.Zombie {
		return fmt.Errorf("pid %d has exited: %w", pid, ErrNotServer)
	}
	if p.UID != uid {
		return fmt.Errorf("pid %d is another user's (uid %d), not the server's: %w", pid, p.UID, ErrNotServer)
	}
	return verifyListener(t, pid, port)
}
