package launch

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// Forward relays SIGINT and SIGQUIT only when stdin is not a
// terminal, and decides that with isTerminal, which tests for a character
// device. /dev/null is a character device: a wrapper started by a service
// manager, cron, nohup or `docker run` (stdin /dev/null) thinks it is at a
// terminal, catches SIGINT and relays nothing. `kill -INT <wrapper>` (or a
// supervisor that stops with SIGINT and signals only its main pid) is
// swallowed: OpenCode keeps running and the wrapper never exits.
func TestDevNullIsNotATerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Errorf("isTerminal(%s) = true: a wrapper whose stdin is /dev/null will not relay SIGINT/SIGQUIT", os.DevNull)
	}
}

func TestSIGINTRelayedWhenStdinIsDevNull(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	saved := os.Stdin
	os.Stdin = devnull
	defer func() { os.Stdin = saved }()

	p, err := NewPlan([]string{"sh", "-c", `trap 'kill $! 2>/dev/null; exit 7' INT; sleep 5 & wait`}, nil, Credentials{Password: "x"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	c, err := Start(p, IO{Stdin: devnull, Stdout: out, Stderr: out})
	if err != nil {
		t.Fatal(err)
	}
	stop := c.Forward()
	defer stop()
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
		t.Errorf("SIGINT sent to the wrapper (stdin %s) never reached the child", os.DevNull)
	}
}
