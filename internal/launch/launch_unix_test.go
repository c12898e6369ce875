//go:build linux || darwin

package launch

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// A wrapper whose stdin is a terminal it is not the foreground job of
// (`mcp-reconnect run -- opencode serve &` from a shell, or a pty it did
// not get as its controlling terminal) receives SIGINT only from kill(2),
// and the kernel sends the child nothing: Start must relay it.
func TestSIGINTRelayedWhenNotTheTerminalsForegroundJob(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	saved := os.Stdin
	os.Stdin = tty // a terminal, but not one whose foreground job we are
	defer func() { os.Stdin = saved }()
	if !isTerminal(tty) {
		t.Fatal("the pty is not a terminal")
	}
	if isForeground(tty.Fd()) {
		t.Skip("the test process is the pty's foreground job; the scenario does not apply")
	}

	p, err := NewPlan([]string{"sh", "-c", `trap 'kill $! 2>/dev/null; exit 7' INT; sleep 5 & wait`}, nil, Credentials{Password: "x"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let sh set its trap
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		if code := c.ExitCode(); code != 7 {
			t.Errorf("child exit code %d, want 7 (its SIGINT trap)", code)
		}
	case <-time.After(3 * time.Second):
		c.Signal(syscall.SIGKILL)
		<-c.Done()
		t.Errorf("SIGINT sent to the wrapper never reached the child: stdin is a terminal but the wrapper is not its foreground job, so the kernel did not deliver it either")
	}
}

// A wrapper that is the terminal's foreground job does not relay SIGINT:
// Ctrl-C reaches the child from the kernel, and a TUI must see one, not
// two. The wrapper here is a helper process, a session leader with the
// pty as its controlling terminal. A SIGINT sent to it alone is not
// relayed (a relayed Ctrl-C would come on top of the kernel's); Ctrl-C on
// the terminal reaches the child.
func TestSIGINTNotRelayedWhenTheTerminalsForegroundJob(t *testing.T) {
	if os.Getenv("LAUNCH_HELPER_FOREGROUND") != "" {
		foregroundHelper()
		return
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	count := filepath.Join(t.TempDir(), "count")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGINTNotRelayedWhenTheTerminalsForegroundJob$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LAUNCH_HELPER_FOREGROUND=1", "LAUNCH_HELPER_COUNT="+count)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var screen syncBuffer
	go func() { _, _ = io.Copy(&screen, ptmx) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !fileHas(count, "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("the helper never got ready; its terminal: %q", screen.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if fileHas(count, "INT") {
		t.Fatal("a SIGINT to the foreground wrapper was relayed: with Ctrl-C the child would get it twice")
	}
	if _, err := ptmx.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !fileHas(count, "INT") {
		if time.Now().After(deadline) {
			t.Fatalf("Ctrl-C never reached the child; its terminal: %q", screen.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// foregroundHelper is the wrapper of the test above: the pty's foreground
// job, it starts a child that logs each SIGINT, and forwards signals
// until it is killed.
func foregroundHelper() {
	count := os.Getenv("LAUNCH_HELPER_COUNT")
	if !isForeground(os.Stdin.Fd()) {
		fmt.Fprintln(os.Stderr, "helper: not the foreground job")
		os.Exit(3)
	}
	script := `trap 'echo INT >> "$C"' INT; echo ready >> "$C"; while :; do sleep 0.1; done`
	p, err := NewPlan([]string{"sh", "-c", script}, []string{"C=" + count, "PATH=" + os.Getenv("PATH")}, Credentials{Password: "x"})
	if err != nil {
		os.Exit(4)
	}
	c, err := Start(p)
	if err != nil {
		os.Exit(5)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		c.Signal(syscall.SIGKILL)
		os.Exit(6)
	}
	os.Exit(0)
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fileHas(path, s string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), s)
}
