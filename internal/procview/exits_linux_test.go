//go:build linux

package procview

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Exits against the kernel: real sleeps, killed. Waits use real time
// (synctest cannot see into epoll_wait), with bounds far above the
// milliseconds measured, logged.

// bound is how long an exit may take to be reported before a test
// fails; it takes about a millisecond.
const bound = 2 * time.Second

// sleepPath is sleep's path, found once.
var sleepPath = sync.OnceValue(func() string {
	p, err := exec.LookPath("sleep")
	if err != nil {
		return "/bin/sleep"
	}
	return p
})

// spawnSleeps starts n sleeps as children with fork and exec alone (no
// os.Process, which holds a pidfd of its own) and kills and reaps those
// left at the end of the test.
func spawnSleeps(tb testing.TB, n int) []int {
	tb.Helper()
	pids := make([]int, 0, n)
	tb.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range pids {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
		}
	})
	attr := &syscall.ProcAttr{Env: []string{}}
	for range n {
		pid, err := syscall.ForkExec(sleepPath(), []string{"sleep", "3600"}, attr)
		if err != nil {
			tb.Fatalf("start sleep %d of %d: %v", len(pids)+1, n, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// kill kills pid and waits until it is reaped.
func kill(tb testing.TB, pid int) {
	tb.Helper()
	must(tb, syscall.Kill(pid, syscall.SIGKILL))
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(pid, &ws, 0, nil)
	must(tb, err)
}

func stat(tb testing.TB, tab Table, pid int) Process {
	tb.Helper()
	p, err := tab.Stat(pid)
	must(tb, err)
	return p
}

// openFDs counts this process's open descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	names, err := readDirNames("/proc/self/fd")
	must(tb, err)
	return len(names) - 1 // the directory's own
}

// noLeaks checks for goroutines left once the test's cleanups (which
// stop Run) have run.
func noLeaks(t *testing.T) { t.Cleanup(func() { goleak.VerifyNone(t) }) }

func newRealExits(t *testing.T) (*Exits, Table) {
	t.Helper()
	e, err := NewExits()
	if errors.Is(err, errors.ErrUnsupported) {
		missing(t, "no pidfds here: %v", err)
	}
	must(t, err)
	t.Cleanup(func() { must(t, e.Close()) })
	tab, err := System()
	must(t, err)
	return e, tab
}

// reports runs e.Run until the test ends, sending what it reports.
func reports(t *testing.T, e *Exits) <-chan Exit {
	ch := make(chan Exit, 20000)
	startRun(t, e, func(x Exit) { ch <- x })
	return ch
}

func await(t *testing.T, ch <-chan Exit, what string) Exit {
	t.Helper()
	select {
	case x := <-ch:
		return x
	case <-time.After(bound):
		t.Fatalf("%s: no exit reported within %v", what, bound)
		return Exit{}
	}
}

// quiet checks that nothing is reported for a while: used only after an
// event that would have been reported together with the unwanted one.
func quiet(t *testing.T, ch <-chan Exit) {
	t.Helper()
	select {
	case x := <-ch:
		t.Fatalf("reported %+v", x)
	case <-time.After(50 * time.Millisecond):
	}
}

// A child's exit, within a millisecond or so.
func TestExitsReportsAChildsExit(t *testing.T) {
	noLeaks(t)
	e, tab := newRealExits(t)
	pid := spawnSleeps(t, 1)[0]
	p := stat(t, tab, pid)
	must(t, e.Add(tab, p))
	ch := reports(t, e)
	killed := time.Now()
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	x := await(t, ch, "a killed child")
	got := time.Now()
	if x.PID != pid || x.Birth != p.Birth {
		t.Fatalf("reported %+v, want pid %d birth %d", x, pid, p.Birth)
	}
	t.Logf("kill → kernel's word %v, → fn %v", x.At.Sub(killed), got.Sub(killed))
	if e.Len() != 0 {
		t.Fatalf("%d still watched", e.Len())
	}
}

// spawnReaders starts n processes that are not this one's children, as
// OpenCode's servers are not, and ends them at the end of the test.
func spawnReaders(tb testing.TB, n int) []int {
	tb.Helper()
	pids, end, err := startReaders(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(end)
	return pids
}

// startReaders starts n subshells of one sh, each blocked reading a pipe
// whose writing end only this process holds (no exec: they are cheap).
// end closes that end, which ends them all, killed or not, and the sh
// reaps them and exits; so does this process's exit.
func startReaders(n int) (pids []int, end func(), err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	sh := exec.Command("sh", "-c", `i=0; while [ $i -lt $1 ]; do (read x <&3) >/dev/null & echo $!; i=$((i+1)); done; exec 3<&-; wait`, "sh", strconv.Itoa(n))
	sh.ExtraFiles = []*os.File{r}
	out, err := sh.StdoutPipe()
	if err == nil {
		err = sh.Start()
	}
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	end = func() {
		_ = w.Close()
		_ = sh.Wait()
	}
	lines := bufio.NewScanner(out)
	for len(pids) < n && lines.Scan() {
		pid, err := strconv.Atoi(lines.Text())
		if err != nil {
			end()
			return nil, nil, err
		}
		pids = append(pids, pid)
	}
	if len(pids) < n {
		end()
		return nil, nil, fmt.Errorf("%d processes started of %d: %v", len(pids), n, lines.Err())
	}
	return pids, end, nil
}

// A process that is not this one's child: the case Exits is for.
func TestExitsReportsANonChildsExit(t *testing.T) {
	noLeaks(t)
	e, tab := newRealExits(t)
	pid := spawnReaders(t, 1)[0]
	p := stat(t, tab, pid)
	if p.PPID == os.Getpid() {
		t.Fatalf("pid %d is this process's child", pid)
	}
	must(t, e.Add(tab, p))
	ch := reports(t, e)
	killed := time.Now()
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	x := await(t, ch, "a killed grandchild")
	got := time.Now()
	if x.PID != pid || x.Birth != p.Birth {
		t.Fatalf("reported %+v, want pid %d birth %d", x, pid, p.Birth)
	}
	t.Logf("kill → kernel's word %v, → fn %v", x.At.Sub(killed), got.Sub(killed))
}

// Gone before Add (reaped, or a zombie), or the pid held by another
// process than the one named: reported at once, never watched, no
// descriptor kept.
func TestExitsAddReportsWhatIsNotThere(t *testing.T) {
	noLeaks(t)
	e, tab := newRealExits(t)
	pids := spawnSleeps(t, 3)
	reaped, zombie, other := stat(t, tab, pids[0]), stat(t, tab, pids[1]), stat(t, tab, pids[2])
	kill(t, reaped.PID)
	must(t, syscall.Kill(zombie.PID, syscall.SIGKILL))
	for p := stat(t, tab, zombie.PID); !p.Zombie; p = stat(t, tab, zombie.PID) {
		time.Sleep(time.Millisecond)
	}
	other.Birth++ // as if the pid were reused since the listing
	fds := openFDs(t)
	for _, p := range []Process{reaped, zombie, other} {
		must(t, e.Add(tab, p))
	}
	if e.Len() != 0 || openFDs(t) != fds {
		t.Fatalf("watched %d, %d descriptors more", e.Len(), openFDs(t)-fds)
	}
	start := time.Now()
	ch := reports(t, e)
	for _, p := range []Process{reaped, zombie, other} {
		if x := await(t, ch, "a process not there"); x.PID != p.PID || x.Birth != p.Birth {
			t.Fatalf("reported %+v, want %d birth %d", x, p.PID, p.Birth)
		}
	}
	t.Logf("reported %v after Run started", time.Since(start))
	if p := stat(t, tab, other.PID); p.Zombie {
		t.Fatal("the other process was touched")
	}
}

// Adding a watched process again keeps one watch; another birth for its
// pid replaces it (here by a process that is not there: reported).
func TestExitsAddAgain(t *testing.T) {
	noLeaks(t)
	e, tab := newRealExits(t)
	pid := spawnSleeps(t, 1)[0]
	p := stat(t, tab, pid)
	fds := openFDs(t)
	must(t, e.Add(tab, p))
	must(t, e.Add(tab, p))
	if e.Len() != 1 || openFDs(t) != fds+1 {
		t.Fatalf("watched %d with %d descriptors more, want 1 and 1", e.Len(), openFDs(t)-fds)
	}
	wrong := p
	wrong.Birth++
	must(t, e.Add(tab, wrong))
	if e.Len() != 0 || openFDs(t) != fds {
		t.Fatalf("watched %d with %d descriptors more, want none", e.Len(), openFDs(t)-fds)
	}
	if x := await(t, reports(t, e), "a replaced watch"); x.PID != pid || x.Birth != wrong.Birth {
		t.Fatalf("reported %+v, want %d birth %d", x, pid, wrong.Birth)
	}
}

// A thousand watched (not children), all killed at once: each reported
// once, and every descriptor given back.
func TestExitsAThousand(t *testing.T) {
	noLeaks(t)
	const n = 1000
	pids := spawnReaders(t, n)
	fds := openFDs(t)
	e, tab := newRealExits(t)
	for _, pid := range pids {
		must(t, e.Add(tab, stat(t, tab, pid)))
	}
	if e.Len() != n || openFDs(t) != fds+2+n {
		t.Fatalf("watched %d with %d descriptors more, want %d and %d", e.Len(), openFDs(t)-fds, n, n+2)
	}
	ch := reports(t, e)
	killed := time.Now()
	for _, pid := range pids {
		must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	seen := map[int]bool{}
	for range n {
		x := await(t, ch, fmt.Sprintf("%d exits", n))
		if seen[x.PID] || !slices.Contains(pids, x.PID) {
			t.Fatalf("reported %+v again, or a pid not watched", x)
		}
		seen[x.PID] = true
	}
	t.Logf("%d exits reported %v after the first kill", n, time.Since(killed))
	quiet(t, ch)
	if e.Len() != 0 || openFDs(t) != fds+2 {
		t.Fatalf("watched %d with %d descriptors more, want none and 2", e.Len(), openFDs(t)-fds)
	}
}

// Close while Run waits in epoll_wait: Run returns at once, and every
// descriptor is closed.
func TestExitsCloseWhileRunWaits(t *testing.T) {
	noLeaks(t)
	fds := openFDs(t)
	e, err := NewExits()
	if errors.Is(err, errors.ErrUnsupported) {
		missing(t, "no pidfds here: %v", err)
	}
	must(t, err)
	tab, err := System()
	must(t, err)
	for _, pid := range spawnSleeps(t, 10) {
		must(t, e.Add(tab, stat(t, tab, pid)))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(t.Context(), func(x Exit) { t.Errorf("reported %+v", x) })
	}()
	time.Sleep(10 * time.Millisecond) // into epoll_wait, most likely
	closed := time.Now()
	must(t, e.Close())
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatal("Run still runs after Close")
	}
	t.Logf("Run returned %v after Close", time.Since(closed))
	if n := openFDs(t); n != fds {
		t.Fatalf("%d descriptors more than before NewExits", n-fds)
	}
}

// Many goroutines adding while Run reports, for the race detector; every
// process watched is reported once when killed.
func TestExitsConcurrentAdds(t *testing.T) {
	noLeaks(t)
	e, tab := newRealExits(t)
	pids := spawnSleeps(t, 200)
	procs := make([]Process, len(pids))
	for i, pid := range pids {
		procs[i] = stat(t, tab, pid)
	}
	ch := reports(t, e)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(procs); i += 4 {
				must(t, e.Add(tab, procs[i]))
				must(t, e.Add(tab, procs[(i+1)%len(procs)])) // another's, maybe watched already
			}
		})
	}
	wg.Wait()
	if e.Len() != len(procs) {
		t.Fatalf("watched %d, want %d", e.Len(), len(procs))
	}
	for _, pid := range pids {
		must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	seen := map[int]bool{}
	for range pids {
		x := await(t, ch, "the watched")
		if seen[x.PID] {
			t.Fatalf("reported %d twice", x.PID)
		}
		seen[x.PID] = true
	}
	quiet(t, ch)
}

// Out of descriptors (RLIMIT_NOFILE lowered, in a child test process so
// that no other test runs short): Add answers ErrNoWatch, and the
// processes watched before stay watched and are reported; once they have
// exited, there is room again.
func TestExitsOutOfDescriptors(t *testing.T) {
	if os.Getenv("PROCVIEW_EXITS_NOFILE") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestExitsOutOfDescriptors$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "PROCVIEW_EXITS_NOFILE=1")
		out, err := cmd.CombinedOutput()
		t.Logf("the child test:\n%s", out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "--- PASS: TestExitsOutOfDescriptors") {
			t.Fatal("the child test did not pass")
		}
		return
	}
	e, tab := newRealExits(t)
	var rl syscall.Rlimit
	must(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	if rl.Cur == 20000 && e.max != 15000 {
		t.Errorf("watch limit %d under 20,000 descriptors, want 15,000", e.max)
	}
	pids := spawnSleeps(t, 40)
	procs := make([]Process, len(pids))
	for i, pid := range pids {
		procs[i] = stat(t, tab, pid)
	}
	var old syscall.Rlimit
	must(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old))
	low := old
	low.Cur = uint64(openFDs(t) + 10)
	must(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	restore := sync.OnceFunc(func() { must(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)) })
	defer restore()

	var watched []int
	full := 0
	for _, p := range procs[:39] {
		err := e.Add(tab, p)
		switch {
		case err == nil:
			watched = append(watched, p.PID)
		case errors.Is(err, ErrNoWatch):
			full++
		default:
			t.Fatalf("Add = %v, want nil or ErrNoWatch", err)
		}
	}
	t.Logf("limit %d: %d watched, %d refused (last: %v)", low.Cur, len(watched), full, e.Add(tab, procs[38]))
	if len(watched) == 0 || full == 0 || e.Len() != len(watched) {
		t.Fatalf("%d watched (Len %d), %d refused: want both", len(watched), e.Len(), full)
	}
	// Made under so low a limit, an Exits leaves every descriptor to
	// the rest of the process.
	if low, err := NewExits(); err == nil {
		if err := low.Add(tab, procs[39]); !errors.Is(err, ErrNoWatch) {
			t.Errorf("Add under a limit of %d = %v, want ErrNoWatch", low.max, err)
		}
		must(t, low.Close())
	}
	ch := reports(t, e)
	for _, pid := range pids[:39] {
		must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	var got []int
	for range watched {
		got = append(got, await(t, ch, "a watched process at the limit").PID)
	}
	quiet(t, ch)
	slices.Sort(got)
	slices.Sort(watched)
	if !slices.Equal(got, watched) {
		t.Fatalf("reported %v, want %v", got, watched)
	}
	// Their descriptors closed, there is room again, limit or not.
	must(t, e.Add(tab, procs[39]))
	restore()
	must(t, syscall.Kill(procs[39].PID, syscall.SIGKILL))
	if x := await(t, ch, "the last"); x.PID != procs[39].PID {
		t.Fatalf("reported %+v, want %d", x, procs[39].PID)
	}
}

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
