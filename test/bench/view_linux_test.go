//go:build linux

package bench

import (
	"os"

	"unsafe"

	"golang.org/x/sys/unix"
)

// The fake OpenCode runs in this process, and the daemon takes the
// process listening on OpenCode's port for OpenCode only when it is one
// (its kernel name "opencode"): so this process takes that name, and the
// daemon watches it with the process view on, as it watches a real local
// OpenCode (its one child is the daemon itself). BENCH_NO_VIEW=1 keeps the
// name, and the view off, for the figures without it. init runs on the
// main thread, whose name /proc/PID/comm shows.
func init() {
	if os.Getenv("BENCH_NO_VIEW") == "" {
		name := append([]byte("opencode"), 0)
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	}
}
