//go:build linux

package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// TestHelperListen is not a test: run as a child, it listens on
// $HELPER_LISTEN_ADDR until its stdin closes.
func TestHelperListen(t *testing.T) {
	addr := os.Getenv("HELPER_LISTEN_ADDR")
	if addr == "" {
		t.Skip("a helper process, not a test")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(2)
	}
	fmt.Println("listening")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = l.Close()
	os.Exit(0)
}

// listenAs runs this test binary, named name, listening on a free
// loopback port; it returns the port and the listener's pid.
func listenAs(t *testing.T, name string) (port, pid int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), name)
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "-test.run=^TestHelperListen$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("HELPER_LISTEN_ADDR=127.0.0.1:%d", port))
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	buf := make([]byte, 64)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if n, _ := out.Read(buf); n > 0 {
			return port, cmd.Process.Pid
		}
	}
	t.Fatal("the helper never listened")
	return 0, 0
}

// What listens on an OpenCode's loopback port without being OpenCode
// (as the view tells one) sees this machine's config files only when it is
// the process the server says it is (its reported pid): a wrapper, a
// renamed binary. Whatever its name, a listener the server does not name
// may forward to files elsewhere, and none are read.
func TestConfigFilesOfAListenerThatIsNotOpenCode(t *testing.T) {
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"socat", "docker-proxy", "ssh", "my-wrapper"} {
		port, pid := listenAs(t, name)
		client, err := opencode.NewServer(opencode.ServerOptions{URL: fmt.Sprintf("http://127.0.0.1:%d", port)})
		if err != nil {
			t.Fatal(err)
		}
		p := newProcWatch(nil, client, 0, slog.New(slog.DiscardHandler))
		for reported, local := range map[int]bool{pid: true, 0: false, 43067: false} {
			if env := p.listenerConfigEnv(tab, opencode.V2, reported); env.Local != local {
				t.Errorf("a listener named %s (pid %d), the server reporting pid %d: config files read = %v, want %v", name, pid, reported, env.Local, local)
			}
		}
	}
}
