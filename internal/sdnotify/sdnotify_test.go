package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// listen is a fake service manager: a datagram socket at name.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func read(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

// shortDir is a temporary directory whose socket paths fit sun_path (108
// bytes), which t.TempDir's long names may not.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestNotifyPathSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "notify")
	srv := listen(t, path)
	n, err := FromEnv(env(map[string]string{"NOTIFY_SOCKET": path}))
	if err != nil || n == nil {
		t.Fatalf("FromEnv = %v, %v", n, err)
	}
	if err := n.Notify(Ready, "STATUS=watching"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, srv); got != "READY=1\nSTATUS=watching" {
		t.Fatalf("datagram %q", got)
	}
	if err := n.Notify(Watchdog); err != nil {
		t.Fatal(err)
	}
	if got := read(t, srv); got != "WATCHDOG=1" {
		t.Fatalf("datagram %q", got)
	}
}

// systemd may hand an abstract socket ("@name"): it has no file, and the
// kernel names it with a leading NUL.
func TestNotifyAbstractSocket(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("abstract unix sockets are Linux's")
	}
	name := fmt.Sprintf("@mcp-reconnect-sdnotify-test-%d", os.Getpid())
	srv := listen(t, name)
	n, err := FromEnv(env(map[string]string{"NOTIFY_SOCKET": name}))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(Ready); err != nil {
		t.Fatal(err)
	}
	if got := read(t, srv); got != Ready {
		t.Fatalf("datagram %q", got)
	}
}

func TestNoSocketIsANoOp(t *testing.T) {
	n, err := FromEnv(env(nil))
	if err != nil || n != nil {
		t.Fatalf("FromEnv without NOTIFY_SOCKET = %v, %v; want nil, nil", n, err)
	}
	if err := n.Notify(Ready); err != nil {
		t.Fatalf("a nil Notifier sent: %v", err)
	}
}

func TestBadSocketNamesRefused(t *testing.T) {
	for _, v := range []string{"relative/path", "@", "vsock:2:1234"} {
		if n, err := FromEnv(env(map[string]string{"NOTIFY_SOCKET": v})); err == nil || n != nil {
			t.Errorf("NOTIFY_SOCKET=%q: %v, %v; want an error", v, n, err)
		} else if !strings.Contains(err.Error(), "NOTIFY_SOCKET") {
			t.Errorf("error %q does not name the variable", err)
		}
	}
}

func TestNotifyToAGoneSocketFails(t *testing.T) {
	n, _ := FromEnv(env(map[string]string{"NOTIFY_SOCKET": filepath.Join(shortDir(t), "gone")}))
	if err := n.Notify(Ready); err == nil {
		t.Fatal("no error for a socket nobody listens on")
	}
}

func TestWatchdogInterval(t *testing.T) {
	const pid = 4242
	for _, tc := range []struct {
		usec, wpid string
		want       time.Duration
		err        bool
	}{
		{"", "", 0, false},
		{"30000000", "", 30 * time.Second, false},
		{"30000000", "4242", 30 * time.Second, false},
		{"30000000", "17", 0, false}, // another process's watchdog
		{"0", "", 0, true},
		{"-5", "", 0, true},
		{"1s", "", 0, true},
		{"30000000", "x", 0, true},
		{"99999999999999999", "", 0, true},
	} {
		got, err := WatchdogInterval(env(map[string]string{"WATCHDOG_USEC": tc.usec, "WATCHDOG_PID": tc.wpid}), pid)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %v, %v; want %v, error %v", tc.usec, tc.wpid, got, err, tc.want, tc.err)
		}
	}
}

// The environment is outside input: no value makes WatchdogInterval
// panic or return a negative or absurd interval.
func FuzzWatchdogInterval(f *testing.F) {
	for _, s := range [][2]string{{"30000000", ""}, {"1", "1"}, {"", ""}, {"18446744073709551615", "1"}, {"+5", "-1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, usec, pid string) {
		d, err := WatchdogInterval(env(map[string]string{"WATCHDOG_USEC": usec, "WATCHDOG_PID": pid}), 1)
		if err != nil && d != 0 || d < 0 || d > maxInterval {
			t.Fatalf("%q %q: %v, %v", usec, pid, d, err)
		}
	})
}
