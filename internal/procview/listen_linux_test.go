package procview

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
)

// ListenAddrs names the ports a process listens on, at the address it
// bound, and none of its other sockets: not a connection it made, not
// one accepted, not a socket of another process.
func TestListenAddrsOfAProcess(t *testing.T) {
	v4, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer v4.Close()
	any, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer any.Close()
	conn, err := net.Dial("tcp", v4.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	accepted, err := v4.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()

	got, err := ListenAddrs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{v4.Addr().(*net.TCPAddr).AddrPort(), netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(any.Addr().(*net.TCPAddr).Port))}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("ListenAddrs = %v, lacks %v", got, w)
		}
	}
	for _, c := range []net.Addr{conn.LocalAddr(), accepted.LocalAddr(), accepted.RemoteAddr()} {
		p := uint16(c.(*net.TCPAddr).Port)
		if p != uint16(v4.Addr().(*net.TCPAddr).Port) && slices.ContainsFunc(got, func(a netip.AddrPort) bool { return a.Port() == p }) {
			t.Errorf("ListenAddrs = %v names the connection's port %d", got, p)
		}
	}
	if got, err := ListenAddrs(1 << 30); err == nil || len(got) > 0 {
		t.Errorf("ListenAddrs of no process = %v, %v; want an error", got, err)
	}
}

// The listener of a loopback port is found among the processes of the
// user asked about; a process of another user is ErrNotMine, never that
// user's listener.
func TestListenerPIDIsTheUsersOwn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if pid, err := ListenerPID(port, os.Getuid()); err != nil || pid != os.Getpid() {
		t.Fatalf("ListenerPID(%d, own uid) = %d, %v; want this process, %d", port, pid, err, os.Getpid())
	}
	if _, err := ListenerPID(port, os.Getuid()+1); !errors.Is(err, ErrNotMine) {
		t.Fatalf("ListenerPID for another uid = %v, want ErrNotMine", err)
	}
	l.Close()
	if _, err := ListenerPID(port, os.Getuid()); err == nil || errors.Is(err, ErrNotMine) {
		t.Fatalf("a free port: %v, want nothing listens", err)
	}
}
