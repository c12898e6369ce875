//go:build linux

package procview

// System reads this machine's process table through /proc.
func System() (Table, error) { return ProcFS("/proc") }

// Unavailable is nil: the process view runs on Linux.
var Unavailable error
