//go:build linux

package procview

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// reusePID makes a new process take pid (once its old owner is reaped):
// the kernel hands out ns_last_pid+1 next, which root may set. Other
// processes on the machine fork too, so it tries a few times.
func reusePID(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	for range 100 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("cannot set the next pid (root is needed to reuse a pid on purpose): %v", err)
			}
			t.Skipf("cannot set the next pid (root is needed to reuse a pid on purpose): %v", err)
		}
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == pid {
			return c
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	t.Fatalf("pid %d was never handed out again", pid)
	return nil
}

// The signal goes to the process the check looked at, even when its pid
// is taken by another process between the check and the signal: the
// pidfd, opened before the check, pins it. A plain kill(2) after the
// check would end the newcomer.
func TestSignalNeverReachesAProcessThatTookThePidAfterTheCheck(t *testing.T) {
	victim := exec.Command("sleep", "60")
	must(t, victim.Start())
	pid := victim.Process.Pid
	var newcomer *exec.Cmd
	verify := func() error {
		// The check passes; then, before the signal, the process exits
		// and is reaped, and its pid goes to another process.
		_ = victim.Process.Kill()
		_ = victim.Wait()
		newcomer = reusePID(t, pid)
		return nil
	}
	err := signalVerified(pid, syscall.SIGTERM, verify)
	if !errors.Is(err, syscall.ESRCH) {
		t.Errorf("signalVerified to an exited process = %v, want ESRCH", err)
	}
	if newcomer == nil {
		t.Fatal("no newcomer took the pid")
	}
	exited := make(chan error, 1)
	go func() { exited <- newcomer.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the process that took pid %d after the check got the signal and exited (%v)", pid, err)
	case <-time.After(300 * time.Millisecond):
		_ = newcomer.Process.Kill()
		<-exited
	}
}
