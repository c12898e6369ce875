//go:build linux

package procview

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A real orphan: a sleep whose parent shell exited, adopted by this test
// process (made a subreaper, so the test does not depend on who adopts
// orphans on this machine), found by Orphans and ended by Reap through a
// pidfd; nothing else is touched.
func TestReapRealOrphan(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	dir := t.TempDir()
	// A command of this run alone, so that no other run's leftover counts.
	secs := fmt.Sprintf("3600.%d", os.Getpid())
	// The same command as the child of a shell that stays: not an orphan.
	keep := exec.Command("sh", "-c", "sleep "+secs+" & wait")
	keep.Dir = dir
	keep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, keep.Start())
	defer func() { _ = syscall.Kill(-keep.Process.Pid, syscall.SIGKILL); _ = keep.Wait() }()
	out, err := exec.Command("sh", "-c", "cd \"$1\" && sleep $2 >/dev/null 2>&1 & echo $!", "sh", dir, secs).Output()
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	must(t, err)
	defer func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
	}()

	tab, err := System()
	must(t, err)
	servers := []Server{{Directory: dir, Name: "sleepy", Command: []string{"sleep", secs}}}
	scope := Scope{UID: os.Getuid(), Subreapers: []int{os.Getpid()}}
	// The shell has exited (Output waited for it): the sleep was adopted then.
	orphans, err := Orphans(tab, servers, scope)
	must(t, err)
	if len(orphans) != 1 || orphans[0].PID != pid || orphans[0].Parentage != ReparentedToSubreaper || orphans[0].Cwd != physical(dir) {
		t.Fatalf("orphans %+v, want the sleep %d", orphans, pid)
	}
	res, err := Reaper{Table: tab, Scope: scope, Grace: 10 * time.Second}.Reap(context.Background(), orphans[0])
	if err != nil || res.Signal != syscall.SIGTERM {
		t.Fatalf("reap = %+v, %v", res, err)
	}
	if p, err := tab.Stat(keep.Process.Pid); err != nil || p.Zombie {
		t.Fatalf("the shell that was not an orphan: %+v %v", p, err)
	}
}
