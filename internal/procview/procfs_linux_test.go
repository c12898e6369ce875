package procview

import (
	"os/exec"
	"testing"
)

// Now is the clock start ticks count in: a process started after a
// reading has a Birth no smaller than it, and a reading after a process
// started is no smaller than its Birth, every time. A clock derived from
// /proc/stat's btime (whole seconds) and the wall clock runs ahead by the
// boot's fraction of a second and fails the first half.
func TestNowOrdersProcessesOnTheirOwnClock(t *testing.T) {
	tab, err := System()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		before := tab.Now()
		cmd := exec.Command("sleep", "10")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p, err := tab.Stat(cmd.Process.Pid)
		after := tab.Now()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if before == 0 || p.Birth < before || p.Birth > after {
			t.Fatalf("a process started between readings %d and %d of Now has birth %d", before, after, p.Birth)
		}
	}
}
