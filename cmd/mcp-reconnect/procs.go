package main

import (
	"runtime"
	"strconv"
)

// oneProc runs the Go scheduler on one processor unless $GOMAXPROCS says
// otherwise. The daemon waits on the network nearly all the time: at
// 1,000 armed directories it makes 35 status reads a second, in bursts
// on the idle grid, and with a processor per core the runtime woke
// another thread for each goroutine a burst readied, and kept it spinning
// for work: a fifth of its idle CPU (BENCHMARKS.md, "Memory at scale").
// It returns the setting it made, 0 for none. A $GOMAXPROCS the runtime
// ignores (not a positive number) is no setting.
func oneProc(getenv func(string) string) int {
	if n, err := strconv.Atoi(getenv("GOMAXPROCS")); err == nil && n > 0 {
		return 0
	}
	runtime.GOMAXPROCS(1)
	return 1
}
