package procview

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// netTCP is a /proc/net/tcp with one socket listening on 127.0.0.1:port
// (inode 7001), one on 0.0.0.0:port+1 (7002), an established connection
// on port (7003) and a listener on another address (10.0.0.5, 7004).
func netTCP(port int) string {
	h := func(p int) string { return fmt.Sprintf("%04X", p) }
	return "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:" + h(port) + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7001 1 0000000000000000 100 0 0 10 0\n" +
		"   1: 00000000:" + h(port+1) + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7002 1 0000000000000000 100 0 0 10 0\n" +
		"   2: 0100007F:" + h(port) + " 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 7003 1 0000000000000000 20 4 30 10 -1\n" +
		"   3: 0500000A:" + h(port+2) + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7004 1 0000000000000000 100 0 0 10 0\n"
}

// giveSockets gives pid file descriptors on the socket inodes.
func giveSockets(t *testing.T, root string, pid int, inodes ...int) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid), "fd")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.Symlink("/dev/null", filepath.Join(dir, "0")))
	for i, ino := range inodes {
		must(t, os.Symlink(fmt.Sprintf("socket:[%d]", ino), filepath.Join(dir, strconv.Itoa(3+i))))
	}
}

// setNSpid rewrites pid's NSpid line: its pid in each nested namespace.
func setNSpid(t *testing.T, root string, pid int, nspids ...int) {
	t.Helper()
	p := filepath.Join(root, strconv.Itoa(pid), "status")
	b, err := os.ReadFile(p)
	must(t, err)
	var ids []string
	for _, n := range nspids {
		ids = append(ids, strconv.Itoa(n))
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "NSpid:") {
			lines[i] = "NSpid:\t" + strings.Join(ids, "\t")
		}
	}
	must(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644))
}

// The pid an OpenCode 2 server reports is taken only for the process of
// this user, in this pid namespace, that holds the socket listening on
// its loopback port; the pid of a server in a container (some other
// process here), a proxy's port, another user's process, a zombie, a pid
// that is another process in its own namespace, are refused.
func TestVerifyServerPID(t *testing.T) {
	const uid, port = 1000, 49374
	root := t.TempDir()
	oc := []string{"/home/u/.opencode/bin/opencode", "serve", "--service"}
	writeTree(t, root, []fakeProc{
		{PID: 1, UID: 0, Argv: []string{"/sbin/init"}},
		{PID: 7, PPID: 1, UID: uid, Argv: oc},                                    // an OpenCode of this user's that serves nothing here
		{PID: 300, PPID: 1, UID: uid, Argv: oc},                                  // the server, listening on 127.0.0.1:port
		{PID: 301, PPID: 1, UID: uid, Argv: oc},                                  // listening on 0.0.0.0:port+1
		{PID: 400, PPID: 1, UID: 0, Argv: []string{"/usr/bin/docker-proxy"}},     // root's proxy on port+1 too
		{PID: 500, PPID: 1, UID: uid, Argv: oc},                                  // a container's process, pid 1 there
		{PID: 600, PPID: 1, UID: uid, Argv: oc, State: "Z"},                      // exited
		{PID: 700, PPID: 1, UID: 2000, Argv: oc},                                 // another user's
		{PID: 800, PPID: 1, UID: uid, Argv: []string{"/usr/bin/ssh", "-L", "x"}}, // holds only a connection
	}, nil)
	must(t, os.MkdirAll(filepath.Join(root, "net"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "net", "tcp"), []byte(netTCP(port)), 0o644))
	giveSockets(t, root, 7)
	giveSockets(t, root, 300, 7001)
	giveSockets(t, root, 301, 7002)
	giveSockets(t, root, 400, 7002)
	giveSockets(t, root, 500, 7001)
	setNSpid(t, root, 500, 500, 1)
	giveSockets(t, root, 700, 7001)
	giveSockets(t, root, 800, 7003)
	tab, err := ProcFS(root)
	must(t, err)

	for _, tc := range []struct {
		pid, port int
		ok        bool
		why       string
	}{
		{300, port, true, ""},
		{301, port + 1, true, ""},          // on the unspecified address
		{7, port, false, "does not hold"},  // a container's "pid 7", here this user's other OpenCode
		{1, port, false, "another user's"}, // a container's "pid 1", here init
		{400, port + 1, false, "another user's"},
		{500, port, false, "pid 1 in its own pid namespace"},
		{600, port, false, "exited"},
		{700, port, false, "another user's"},
		{800, port, false, "does not hold"}, // a connection, not the listener
		{300, port + 2, false, "nothing listens on loopback port"},
		{300, port + 3, false, "nothing listens"},
		{4242, port, false, "no process here"},
		{0, port, false, "pid 0"},
	} {
		err := VerifyServerPID(tab, tc.pid, tc.port, uid)
		switch {
		case tc.ok && err != nil:
			t.Errorf("pid %d port %d: %v, want verified", tc.pid, tc.port, err)
		case !tc.ok && (!errors.Is(err, ErrNotServer) || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("pid %d port %d: %v, want ErrNotServer saying %q", tc.pid, tc.port, err, tc.why)
		}
	}

	// A Table without a /proc tree cannot show sockets: the caller is told.
	mem := newMemTable(Process{PID: 300, UID: uid, Argv: oc})
	if err := VerifyServerPID(mem, 300, port, uid); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("a table without sockets: %v, want ErrUnsupported", err)
	}
	if err := VerifyServerPID(mem, 301, port, uid); !errors.Is(err, ErrNotServer) {
		t.Errorf("a missing pid in a table without sockets: %v, want ErrNotServer", err)
	}
}

// On this machine's /proc: this test process, listening on a loopback
// port, is verified as that port's server; a child of it (which inherits
// no listener) and the port of nothing are not.
func TestVerifyServerPIDLive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	tab, err := System()
	must(t, err)
	if err := VerifyServerPID(tab, os.Getpid(), port, os.Getuid()); err != nil {
		t.Fatalf("this process, listening on %d: %v", port, err)
	}
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		missing(t, "no sleep: %v", err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if err := VerifyServerPID(tab, child.Process.Pid, port, os.Getuid()); !errors.Is(err, ErrNotServer) {
		t.Errorf("a child that does not listen: %v", err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	if err := VerifyServerPID(tab, os.Getpid(), freePort, os.Getuid()); !errors.Is(err, ErrNotServer) {
		t.Errorf("a port nothing listens on: %v", err)
	}
}
