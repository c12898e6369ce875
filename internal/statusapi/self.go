package statusapi

import (
	"os"
	"runtime"

	"github.com/prometheus/procfs"
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

// self reads the daemon's own cost: /proc/self/status's VmRSS and VmHWM,
// read as the rest of the daemon reads /proc (prometheus/procfs).
func self() *Daemon {
	d := &Daemon{PID: os.Getpid(), Goroutines: runtime.NumGoroutine()}
	if p, err := procfs.Self(); err == nil {
		if st, err := p.NewStatus(); err == nil {
			d.RSS, d.PeakRSS = int64(st.VmRSS), int64(st.VmHWM)
		}
	}
	return d
}
