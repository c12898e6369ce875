package procview

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The process view at the scale of BENCHMARKS.md: one OpenCode with
// 1,000 directories × 10 local servers, 10,000 children, in a /proc tree
// written to a temporary directory. Run:
//
//	go test -run '^$' -bench . -benchtime 200x ./internal/procview/
//
// Each reports CPU time per scan from getrusage (user+system of the whole
// process, GC included) next to ns/op, and files read per scan.

const benchDirs, benchPerDir = 1000, 10

// sys0 is the system time when the measured loop began.
var sys0 time.Duration

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sysTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Stime.Nano())
}

func benchView(b *testing.B) (*procTable, *View) {
	root := b.TempDir()
	servers := syntheticMany(b, root, benchDirs, benchPerDir)
	pt := openTable(b, root)
	v := newView(b, pt, 100, servers)
	s := scan(b, v)
	if n := len(s.Servers); n != benchDirs*benchPerDir {
		b.Fatalf("%d servers served, want %d", n, benchDirs*benchPerDir)
	}
	return pt, v
}

func report(b *testing.B, pt *procTable, reads0 int64, cpu0 time.Duration) {
	perScan := (cpuTime() - cpu0) / time.Duration(b.N)
	b.ReportMetric(float64((sysTime()-sys0)/time.Duration(b.N))/1e3, "sys-µs/scan")
	b.ReportMetric(float64(perScan.Microseconds()), "cpu-µs/scan")
	b.ReportMetric(float64(pt.reads.Load()-reads0)/float64(b.N), "files/scan")
	// The cost at a 2 s period, as a share of one core.
	b.ReportMetric(perScan.Seconds()/2*100, "%core@2s")
}

// An idle scan: nothing started or exited.
func BenchmarkIdleScan(b *testing.B) {
	pt, v := benchView(b)
	reads0, cpu0 := pt.reads.Load(), cpuTime()
	sys0 = sysTime()
	// Markers for strace (BENCHMARKS.md counts the system calls between them).
	_, _ = os.Stat("/procview-bench-start")
	for b.Loop() {
		if _, err := v.Scan(); err != nil {
			b.Fatal(err)
		}
	}
	_, _ = os.Stat("/procview-bench-end")
	report(b, pt, reads0, cpu0)
}

// An idle scan on a kernel without children lists: every stat is read.
func BenchmarkIdleScanWithoutChildrenLists(b *testing.B) {
	pt, v := benchView(b)
	pt.noChildren.Store(true)
	reads0, cpu0 := pt.reads.Load(), cpuTime()
	sys0 = sysTime()
	// Markers for strace (BENCHMARKS.md counts the system calls between them).
	_, _ = os.Stat("/procview-bench-start")
	for b.Loop() {
		if _, err := v.Scan(); err != nil {
			b.Fatal(err)
		}
	}
	_, _ = os.Stat("/procview-bench-end")
	report(b, pt, reads0, cpu0)
}

// A scan that sees one child exit and its replacement start (a crash
// repaired): the snapshot of 10,000 children is built again.
func BenchmarkScanOneRestart(b *testing.B) {
	root := b.TempDir()
	servers := syntheticMany(b, root, benchDirs, benchPerDir)
	pt := openTable(b, root)
	v := newView(b, pt, 100, servers)
	scan(b, v)
	kids, _ := pt.Children(100)
	other := openTable(b, root) // the benchmark's own reads are not the view's
	next := 100000
	reads0, cpu0 := pt.reads.Load(), cpuTime()
	sys0 = sysTime()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		old := kids[i%len(kids)]
		p, _ := other.Read(old)
		must(b, os.RemoveAll(filepath.Join(root, strconv.Itoa(old))))
		writeProc(b, root, fakeProc{PID: next, PPID: 100, UID: ana, Start: uint64(next), Argv: p.Argv, Cwd: p.Cwd}, nil)
		kids[i%len(kids)] = next
		next++
		setChildren(b, root, 100, kids)
		b.StartTimer()
		if _, err := v.Scan(); err != nil {
			b.Fatal(err)
		}
	}
	report(b, pt, reads0, cpu0)
}

// The first scan: every child read whole (the view's start-up cost).
func BenchmarkFirstScan(b *testing.B) {
	root := b.TempDir()
	servers := syntheticMany(b, root, benchDirs, benchPerDir)
	pt := openTable(b, root)
	reads0, cpu0 := pt.reads.Load(), cpuTime()
	sys0 = sysTime()
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		v := newView(b, pt, 100, servers)
		scan(b, v)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(v)
	}
	report(b, pt, reads0, cpu0)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "retained-MiB")
}

// Orphans over a table of 10,000 processes (status, doctor).
func BenchmarkOrphans(b *testing.B) {
	root := b.TempDir()
	servers := syntheticMany(b, root, benchDirs, benchPerDir)
	pt := openTable(b, root)
	reads0, cpu0 := pt.reads.Load(), cpuTime()
	sys0 = sysTime()
	for b.Loop() {
		if _, err := Orphans(pt, servers, Scope{UID: ana, Watched: []int{100}}); err != nil {
			b.Fatal(err)
		}
	}
	perScan := (cpuTime() - cpu0) / time.Duration(b.N)
	b.ReportMetric(float64(perScan.Microseconds()), "cpu-µs/op")
	b.ReportMetric(float64(pt.reads.Load()-reads0)/float64(b.N), "files/op")
}

// The real /proc: this process as the "OpenCode" of BENCH_REAL_CHILDREN
// (default 1,000) sleeping children, 10 per directory.
func BenchmarkIdleScanRealProc(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("BENCH_REAL_CHILDREN")); err == nil {
		n = v
	}
	var servers []LocalServer
	var cmds []*exec.Cmd
	b.Cleanup(func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	base := b.TempDir()
	for i := range n {
		dir := filepath.Join(base, fmt.Sprintf("project %d", i/10))
		must(b, os.MkdirAll(dir, 0o755))
		cmd := exec.Command("sleep", "3600", strconv.Itoa(i%10))
		cmd.Dir = dir
		must(b, cmd.Start())
		cmds = append(cmds, cmd)
		servers = append(servers, LocalServer{Directory: dir, Name: fmt.Sprintf("server %d", i%10), Command: cmd.Args})
	}
	pt := openTable(b, "/proc")
	v := newView(b, pt, os.Getpid(), servers)
	if s := scan(b, v); len(s.Servers) != n {
		b.Fatalf("%d served, want %d", len(s.Servers), n)
	}
	reads0, cpu0 := pt.reads.Load(), cpuTime()
	sys0 = sysTime()
	// Markers for strace (BENCHMARKS.md counts the system calls between them).
	_, _ = os.Stat("/procview-bench-start")
	for b.Loop() {
		if _, err := v.Scan(); err != nil {
			b.Fatal(err)
		}
	}
	_, _ = os.Stat("/procview-bench-end")
	report(b, pt, reads0, cpu0)
}

// The matcher alone at the scale of BENCHMARKS.md: SetServers with 10,000
// servers (the matcher is built), then serving() for each of 10,000
// children, as the first scan does.
func BenchmarkMatcher(b *testing.B) {
	root := b.TempDir()
	servers := syntheticMany(b, root, benchDirs, benchPerDir)
	pt := openTable(b, root)
	kids, err := pt.Children(100)
	must(b, err)
	procs := make([]Process, 0, len(kids))
	for _, c := range kids {
		p, err := pt.Read(c)
		must(b, err)
		procs = append(procs, p)
	}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			newMatcher(servers)
		}
	})
	m := newMatcher(servers)
	b.Run("serving", func(b *testing.B) {
		for b.Loop() {
			for _, p := range procs {
				if len(m.serving(p)) != 1 {
					b.Fatalf("%v serves nothing", p.Argv)
				}
			}
		}
	})
}

// alikeServers is the scale benchmark's configuration (test/bench):
// dirs directories "/bench/dir NNNN", which do not exist here, each
// configured with the same perDir commands.
func alikeServers(dirs, perDir int) []LocalServer {
	cmds := make([][]string, perDir)
	for s := range cmds {
		cmds[s] = []string{"node", "/home/ana/mcp/server-" + strconv.Itoa(s) + ".js", "--stdio"}
	}
	servers := make([]LocalServer, 0, dirs*perDir)
	for d := range dirs {
		dir := fmt.Sprintf("/bench/dir %04d", d)
		for s, cmd := range cmds {
			servers = append(servers, LocalServer{Directory: dir, Name: "s" + strconv.Itoa(s), Command: cmd})
		}
	}
	return servers
}

// liveBytes is how much more heap is in use after build than before,
// what build returns kept alive.
func liveBytes(build func() any) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(x)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// The view's servers at the scale of the daemon's benchmark: 1,000
// directories × 10 servers configured alike. "live" is what the view
// holds for them beyond the caller's list; "armed" sets them again with
// one directory more (what the daemon does while directories are being
// armed), "unchanged" with an equal list (a new generation of the
// engine's list that changed nothing). Run with -benchmem.
func BenchmarkSetServersAtScale(b *testing.B) {
	servers := alikeServers(benchDirs, benchPerDir)
	fewer := servers[:len(servers)-benchPerDir]
	tab := newMemTable(Process{PID: 100, PPID: 1, UID: ana, Argv: []string{"opencode", "serve"}, Cwd: "/"})
	b.Run("live", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = liveBytes(func() any { return newView(b, tab, 100, servers) })
		}
		b.ReportMetric(float64(n)/(1<<10), "live-KiB")
	})
	b.Run("armed", func(b *testing.B) {
		v := newView(b, tab, 100, fewer)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%2 == 0 {
				v.SetServers(servers)
			} else {
				v.SetServers(fewer)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		v := newView(b, tab, 100, servers)
		again := slices.Clone(servers)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%2 == 0 {
				v.SetServers(again)
			} else {
				v.SetServers(servers)
			}
		}
	})
}
