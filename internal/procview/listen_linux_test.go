package procview

import (
	"errors"
	"net"
	"os"
	"testing"
)

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
