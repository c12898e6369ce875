//go:build unix

package launch

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A detached process is not this process's child (so a TUI this process
// execs into never holds it as a zombie), runs in a session of its own,
// and gets the environment it was given.
func TestStartDetachedIsNotOurChild(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	pid, err := StartDetached("/bin/sh", []string{"-c", `echo "$$ $(ps -o sid= -p $$) $DETACH_MARK" > ` + out + `; sleep 2`}, []string{"DETACH_MARK=here", "PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); !errors.Is(err, syscall.ECHILD) {
		t.Fatalf("wait4(%d) = %d, %v: the detached process is this process's child", pid, got, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var fields []string
	for len(fields) < 3 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(out)
		fields = strings.Fields(string(b))
		time.Sleep(20 * time.Millisecond)
	}
	if len(fields) < 3 || fields[0] != strconv.Itoa(pid) || fields[2] != "here" {
		t.Fatalf("the detached process wrote %q; want its pid %d, its session and the environment's mark", fields, pid)
	}
	if sid, _ := strconv.Atoi(fields[1]); sid == 0 || sid == mySession(t) {
		t.Errorf("the detached process is in session %d, ours is %d: want a session of its own", sid, mySession(t))
	}
	if ppid := parentOf(t, pid); ppid == os.Getpid() {
		t.Errorf("the detached process's parent is this process")
	}
}

func mySession(t *testing.T) int {
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

func parentOf(t *testing.T, pid int) int {
	out, err := exec.Command("ps", "-o", "ppid=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		t.Fatalf("ps: %v", err)
	}
	ppid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return ppid
}
