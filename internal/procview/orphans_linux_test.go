//go:build linux

package procview

import (
	"context"
	"errors"
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
// pidfd; nothing else is touched. The shell plays OpenCode 1.14 or later:
// it leads its process group and puts its pid in its child's environment
// (OPENCODE_PID), which is the evidence. The same command started with
// setsid, whose parent exited too, is no orphan: it leads its own group
// and its environment names no OpenCode.
func TestReapRealOrphan(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		missing(t, "cannot become a subreaper: %v", err)
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
	opencode := exec.Command("sh", "-c", "cd \"$1\" && OPENCODE_PID=$$ sleep $2 >/dev/null 2>&1 & echo $!", "sh", dir, secs)
	opencode.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := opencode.Output()
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	must(t, err)
	service := exec.Command("sh", "-c", "cd \"$1\" && setsid sleep $2 >/dev/null 2>&1 & echo $!", "sh", dir, secs)
	out, err = service.Output()
	must(t, err)
	servicePID, err := strconv.Atoi(strings.TrimSpace(string(out)))
	must(t, err)
	defer func() {
		for _, p := range []int{pid, servicePID} {
			_ = syscall.Kill(p, syscall.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(p, &ws, 0, nil)
		}
	}()
	waitSetsid(t, servicePID)

	tab, err := System()
	must(t, err)
	servers := []LocalServer{{Directory: dir, Name: "sleepy", Command: []string{"sleep", secs}}}
	scope := Scope{UID: os.Getuid(), Subreapers: []int{os.Getpid()}}
	// The shell has exited (Output waited for it): the sleep was adopted then.
	orphans, err := Orphans(tab, configured(servers), scope)
	must(t, err)
	var orphan, leftover Orphan
	for _, o := range orphans {
		switch o.PID {
		case pid:
			orphan = o
		case servicePID:
			leftover = o
		}
	}
	if len(orphans) != 2 || orphan.Evidence != EnvOfGoneOpenCode || orphan.Parentage != ReparentedToSubreaper || orphan.Cwd != physical(dir) {
		t.Fatalf("orphans %+v, want the sleep %d proven by its OPENCODE_PID", orphans, pid)
	}
	if leftover.Evidence.Proven() || !strings.Contains(leftover.Why, "leads its own process group") {
		t.Fatalf("the setsid sleep %d: %+v", servicePID, leftover)
	}
	r := Reaper{Table: tab, Scope: scope}
	if _, err := r.Reap(context.Background(), leftover); !errors.Is(err, ErrNotOrphan) {
		t.Fatalf("reap of the setsid sleep = %v", err)
	}
	res, err := r.Reap(context.Background(), orphan)
	if err != nil || res.Signal != syscall.SIGTERM {
		t.Fatalf("reap = %+v, %v", res, err)
	}
	for _, p := range []int{keep.Process.Pid, servicePID} {
		if p, err := tab.Stat(p); err != nil || p.Zombie {
			t.Fatalf("pid %d, not an orphan: %+v %v", p.PID, p, err)
		}
	}
}

// waitSetsid waits until pid has left its starter's session (setsid
// forks and execs: the pid printed is setsid's, which becomes the sleep).
func waitSetsid(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(b)) == "sleep" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d never became the sleep", pid)
}
