//go:build linux

package procview

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Exits at scale: BENCH_EXITS processes (default 2,000; 10,000 is the
// scale of BENCHMARKS.md, but starting them takes a minute or more on
// these loaded 2-core machines) that are not this process's children
// (startReaders, once for all the benchmarks), all watched. Run:
//
//	go test -run '^$' -bench Exits -benchtime 3x ./internal/procview/
//	BENCH_EXITS=10000 go test -run '^$' -bench Exits -benchtime 3x ./internal/procview/
//
// BenchmarkExitsLatency kills one process per op: give it -benchtime of
// at most BENCH_EXITS ops (a count, "500x").

func benchExitsN() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_EXITS")); err == nil && n > 0 {
		return n
	}
	return 2000
}

// benchPool holds the processes the benchmarks watch, started once for
// all of them (starting them is most of the time a run takes). They end
// when this process does (startReaders).
var benchPool struct {
	sync.Mutex
	tab   Table
	procs []Process // the live ones
	// ends holds the ends of the pipes: unreachable, a pipe's os.File
	// would be closed by its finalizer at the next GC, ending them all.
	ends []func()
}

// benchProcs returns the pool, started on first use.
func benchProcs(b *testing.B) (Table, []Process) {
	b.Helper()
	benchPool.Lock()
	defer benchPool.Unlock()
	if n := benchExitsN(); len(benchPool.procs) < n {
		t0 := time.Now()
		pids, end, err := startReaders(n - len(benchPool.procs))
		must(b, err)
		benchPool.ends = append(benchPool.ends, end)
		b.Logf("%d processes started in %v", len(pids), time.Since(t0))
		if benchPool.tab == nil {
			benchPool.tab, err = System()
			must(b, err)
		}
		for _, pid := range pids {
			benchPool.procs = append(benchPool.procs, stat(b, benchPool.tab, pid))
		}
	}
	return benchPool.tab, slices.Clone(benchPool.procs)
}

// benchKilled takes the first n processes out of the pool.
func benchKilled(n int) {
	benchPool.Lock()
	defer benchPool.Unlock()
	benchPool.procs = benchPool.procs[n:]
}

func benchExits(b *testing.B) *Exits {
	b.Helper()
	e, err := NewExits()
	if err != nil {
		missing(b, "no exit watcher here: %v", err)
	}
	return e
}

// kernelBytes is what the kernel's slab caches hold in all, from
// /proc/slabinfo (root only; 0 when unreadable). It counts every
// process on the machine: only a difference over a short span, across
// thousands of objects, says anything.
func kernelBytes() int64 {
	raw, err := os.ReadFile("/proc/slabinfo")
	if err != nil {
		return 0
	}
	var sum int64
	for _, l := range strings.Split(string(raw), "\n")[2:] {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		size, _ := strconv.ParseInt(f[3], 10, 64)
		sum += n * size
	}
	return sum
}

// Watching every process: the Go heap each watch keeps, the kernel
// memory it costs (the first time a process is watched: the kernel keeps
// a pid's pidfs inode while the process lives), and the time of one Add.
func BenchmarkExitsAdd(b *testing.B) {
	tab, procs := benchProcs(b)
	var heap, kernel []float64
	var adds time.Duration
	for b.Loop() {
		e := benchExits(b)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		k0 := kernelBytes()
		t0 := time.Now()
		for _, p := range procs {
			must(b, e.Add(tab, p))
		}
		adds += time.Since(t0)
		k1 := kernelBytes()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if e.Len() != len(procs) {
			b.Fatalf("%d watched, want %d", e.Len(), len(procs))
		}
		heap = append(heap, float64(after.HeapAlloc-before.HeapAlloc)/float64(len(procs)))
		kernel = append(kernel, float64(k1-k0)/float64(len(procs)))
		must(b, e.Close())
	}
	b.ReportMetric(slices.Min(heap), "heap-B/proc")
	b.ReportMetric(kernel[0], "kernel-B/proc")
	b.ReportMetric(float64(adds.Nanoseconds())/float64(b.N*len(procs)), "ns/Add")
}

// Run with every process watched and none exiting: CPU time of the
// whole test process (Go runtime included) per second, next to the same
// process idle without Run for two seconds before. Run sits in
// epoll_wait; each op is one second of that.
func BenchmarkExitsIdleRun(b *testing.B) {
	tab, procs := benchProcs(b)
	e := benchExits(b)
	defer e.Close()
	for _, p := range procs {
		must(b, e.Add(tab, p))
	}
	runtime.GC()
	// The same process idle without Run: the Go runtime's own cost.
	cpu0, t0 := cpuTime(), time.Now()
	time.Sleep(2 * time.Second)
	base := float64((cpuTime() - cpu0).Microseconds()) / time.Since(t0).Seconds()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx, func(x Exit) { b.Errorf("reported %+v", x) })
	}()
	defer func() { cancel(); <-done }()
	cpu0, t0 = cpuTime(), time.Now()
	for b.Loop() {
		time.Sleep(time.Second)
	}
	perSec := float64((cpuTime() - cpu0).Microseconds()) / time.Since(t0).Seconds()
	b.ReportMetric(perSec, "cpu-µs/s")
	b.ReportMetric(base, "no-Run-cpu-µs/s")
	b.ReportMetric(perSec/1e6*100, "%core")
}

// One watched process killed per op, the others watched: the time from
// kill(2) to fn (ns/op), split at the moment epoll_wait returned (At).
func BenchmarkExitsLatency(b *testing.B) {
	tab, procs := benchProcs(b)
	e := benchExits(b)
	defer e.Close()
	for _, p := range procs {
		must(b, e.Add(tab, p))
	}
	type heard struct {
		x  Exit
		at time.Time
	}
	ch := make(chan heard, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx, func(x Exit) { ch <- heard{x, time.Now()} })
	}()
	defer func() { cancel(); <-done }()
	var kernel, ours []time.Duration
	i := 0
	defer func() { benchKilled(i) }()
	for b.Loop() {
		if i == len(procs) {
			b.Fatalf("all %d processes killed: give -benchtime %dx or less", i, i)
		}
		p := procs[i]
		i++
		killed := time.Now()
		must(b, syscall.Kill(p.PID, syscall.SIGKILL))
		h := <-ch
		if h.x.PID != p.PID {
			b.Fatalf("reported %+v, want pid %d", h.x, p.PID)
		}
		kernel = append(kernel, h.x.At.Sub(killed))
		ours = append(ours, h.at.Sub(h.x.At))
	}
	slices.Sort(kernel)
	slices.Sort(ours)
	b.ReportMetric(float64(kernel[len(kernel)/2].Microseconds()), "kill→wake-µs-p50")
	b.ReportMetric(float64(kernel[len(kernel)*99/100].Microseconds()), "kill→wake-µs-p99")
	b.ReportMetric(float64(ours[len(ours)/2].Nanoseconds())/1e3, "wake→fn-µs-p50")
	b.ReportMetric(float64(e.Len()), "watched-after")
}
