package statusapi

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Daemon is what the daemon costs now: its own memory and goroutines, so
// a user can see it stay small (BENCHMARKS.md has the figures at scale).
type Daemon struct {
	PID int `json:"pid"`
	// RSS and PeakRSS are the resident memory now and at its highest, in
	// bytes; 0 where the system does not tell (only Linux does here).
	RSS        int64 `json:"rss_bytes,omitempty"`
	PeakRSS    int64 `json:"peak_rss_bytes,omitempty"`
	Goroutines int   `json:"goroutines"`
}

// self reads the daemon's own cost.
func self() *Daemon {
	d := &Daemon{PID: os.Getpid(), Goroutines: runtime.NumGoroutine()}
	d.RSS, d.PeakRSS = rss("/proc/self/status")
	return d
}

// rss reads VmRSS and VmHWM from a /proc/PID/status file.
func rss(path string) (now, peak int64) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "VmRSS" && key != "VmHWM" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			continue
		}
		if key == "VmRSS" {
			now = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return now, peak
}
