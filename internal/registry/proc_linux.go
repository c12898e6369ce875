package registry

import "github.com/prometheus/procfs"

// readProc reads pid's state and start time from /proc/PID/stat. The
// start is in clock ticks since boot: it never changes for a process,
// whatever the wall clock does.
func readProc(pid int) (procInfo, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return procInfo{}, err
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return procInfo{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return procInfo{}, err
	}
	// Z: exited, not reaped by its parent. X (dead) is only seen in the
	// instant the parent reaps it.
	return procInfo{exited: st.State == "Z" || st.State == "X", start: st.Starttime}, nil
}
