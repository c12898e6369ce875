//go:build linux

package procview

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// Exits "stops at three quarters of
// the soft RLIMIT_NOFILE ..., so that its pidfds never take the
// descriptors the daemon's connections and /proc reads need". The cap is
// per Exits, but the limit is per process: the daemon watches several
// OpenCode servers from one process (SPEC, "Beyond the plugin"), and each
// watched server's procWatch makes an Exits of its own, each allowed
// three quarters. Two OpenCodes with many children take 150 % of the
// budget between them: the descriptors left for the status API, the
// OpenCode connections and the /proc reads run out (EMFILE), which is
// what the cap is there to prevent.
func TestExitWatchersTogetherLeaveAQuarterOfTheDescriptors(t *testing.T) {
	var old unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	lim := unix.Rlimit{Cur: 320, Max: old.Max}
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
	budget := watchLimit() // 64 of 320: a quarter, at least 256, is kept
	pids := spawnSleeps(t, 2*budget+8)
	tab, err := ProcFS("/proc")
	must(t, err)

	total := 0
	for range 2 { // two watched OpenCode servers, one daemon
		e, err := NewExits()
		if errors.Is(err, errors.ErrUnsupported) {
			missing(t, "no pidfds here: %v", err)
		}
		must(t, err)
		t.Cleanup(func() { _ = e.Close() })
		for _, pid := range pids {
			if err := e.Add(tab, stat(t, tab, pid)); err != nil {
				if !errors.Is(err, ErrNoWatch) {
					t.Fatal(err)
				}
				break
			}
		}
		total += e.Len()
	}
	if total > budget {
		t.Errorf("two exit watchers of one daemon hold %d pidfds; the soft limit is %d and the cap one Exits keeps to is %d: only %d descriptors are left for everything else", total, lim.Cur, budget, int(lim.Cur)-total)
	}
}
