package procview

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func pids(cs []Child) []int {
	var out []int
	for _, c := range cs {
		out = append(out, c.PID)
	}
	return out
}

func newView(t testing.TB, tab Table, pid int, servers []LocalServer) *View {
	t.Helper()
	v, err := NewView(tab, pid)
	if err != nil {
		t.Fatal(err)
	}
	v.SetServers(servers)
	return v
}

func scan(t testing.TB, v *View) Snapshot {
	t.Helper()
	s, err := v.Scan()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What the real OpenCode 1.18.34 ran, recorded: each configured server
// is found by its command in its working directory, a relative cwd and
// a relative command included, and a `sh -c` server is served by the sh.
func TestViewRecordedOpenCode(t *testing.T) {
	dir := "/tmp/procx/my projéct"
	servers := []LocalServer{
		{Directory: dir, Name: "plain", Command: []string{"/tmp/procx/mcpserver", "-transport", "stdio", "-name", "plain"}},
		{Directory: dir, Name: "with cwd", Command: []string{"../mcpserver", "-transport", "stdio", "-name", "Authorization: Bearer sekrit"}, Cwd: "sub dir"},
		{Directory: dir, Name: "abs cwd", Command: []string{"/tmp/procx/mcpserver", "-transport", "stdio"}, Cwd: "/tmp"},
		{Directory: dir, Name: "shell", Command: []string{"sh", "-c", "/tmp/procx/mcpserver -transport stdio; echo done"}},
	}
	v := newView(t, openTable(t, filepath.Join("testdata", "opencode-1.18.34")), 21276, servers)
	s := scan(t, v)
	want := map[string]int{"plain": 21919, "with cwd": 21496, "abs cwd": 21929, "shell": 21506}
	for name, pid := range want {
		c, ok := s.Child(Key{dir, name})
		if !ok || c.PID != pid || c.Parent != 21276 {
			t.Errorf("%s served by %+v (found %v), want pid %d", name, c, ok, pid)
		}
	}
	if len(s.Others) != 0 || len(s.Duplicates()) != 0 {
		t.Errorf("others %v duplicates %v, want none", s.Others, s.Duplicates())
	}
	if c, _ := s.Child(Key{dir, "with cwd"}); strings.Contains(c.Command(), "sekrit") {
		t.Errorf("a child's Command shows a secret: %q", c.Command())
	}
}

// The synthetic TUI: children on its Worker thread, a server run by its
// interpreter, a duplicate, a zombie and two vanished processes.
func TestViewSynthetic(t *testing.T) {
	v := newView(t, openTable(t, filepath.Join("testdata", "synthetic")), 2000, syntheticServers())
	s := scan(t, v)
	for k, want := range map[Key][]int{
		{project, "my server"}: {2100, 2106},
		{project, "gh"}:        {2101},
		{other, "proxy"}:       {2102},
	} {
		if got := pids(s.Servers[k]); !slices.Equal(got, want) {
			t.Errorf("%v served by %v, want %v", k, got, want)
		}
	}
	if cs := s.Servers[Key{other, "gh"}]; len(cs) != 0 {
		t.Errorf("other dir's gh served by %v: a zombie serves nothing", pids(cs))
	}
	if got := pids(s.Others); !slices.Equal(got, []int{2107}) {
		t.Errorf("others %v, want [2107]", got)
	}
	d := s.Duplicates()
	if len(d) != 1 || d[0].Keys[0] != (Key{project, "my server"}) || !slices.Equal(pids(d[0].Children), []int{2100, 2106}) {
		t.Errorf("duplicates %+v", d)
	}
	if c, _ := s.Child(Key{project, "my server"}); c.PID != 2106 {
		t.Errorf("Child gives %d, want the newest (2106)", c.PID)
	}
	if c, _ := s.Child(Key{other, "proxy"}); c.Command() != "/usr/local/bin/mcp-proxy --header 'Authorization: ***' https://mcp.example.com/x" {
		t.Errorf("proxy command shown as %q", c.Command())
	}
}

// A scan after a child exited reports it, with the time bounds; a new
// child for the same server is reported as started.
func TestViewReportsExitAndStart(t *testing.T) {
	root := t.TempDir()
	writeSynthetic(t, root)
	v := newView(t, openTable(t, root), 2000, syntheticServers())
	first := scan(t, v)
	must(t, os.RemoveAll(filepath.Join(root, "2101")))
	writeProc(t, root, fakeProc{PID: 2200, PPID: 2000, UID: ana, Start: 99000, Argv: ghArgv, Cwd: project}, nil)
	setChildren(t, root, 2000, []int{2100, 2102, 2106, 2107, 2200})
	second := scan(t, v)
	want := []string{"exited gh 2101", "started gh 2200"}
	if got := describe(first, second); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if ev := describe(second, scan(t, v)); len(ev) != 0 {
		t.Fatalf("an unchanged scan gave %v", ev)
	}
}

// describe lists what changed from prev to next, as Run tells its
// handler: "exited KEY PID", then "started KEY PID".
func describe(prev, next Snapshot) []string {
	var out []string
	changes(prev, next, func(started bool, k Key, c Child) {
		out = append(out, fmt.Sprintf("%s %s %d", map[bool]string{false: "exited", true: "started"}[started], k.Name, c.PID))
	})
	return out
}

// An idle scan reads OpenCode's stat and its children lists, whatever
// the number of children: the cost BENCHMARKS.md measures.
func TestIdleScanReadsOnlyTheChildrenLists(t *testing.T) {
	pt := openTable(t, filepath.Join("testdata", "synthetic"))
	v := newView(t, pt, 2000, syntheticServers())
	scan(t, v)
	before := pt.reads.Load()
	scan(t, v)
	// OpenCode's stat, the task directory and 3 threads' lists; the
	// zombie and the vanished children still listed are not read again.
	if n := pt.reads.Load() - before; n != 5 {
		t.Fatalf("an idle scan read %d files, want 5", n)
	}
}

// The kernel's list of children can miss one while the tree changes: a
// child missing from it but alive, same birth, same parent, has not
// exited.
func TestViewChildMissingFromListIsNoExit(t *testing.T) {
	tab, oc := simpleTable()
	v := newView(t, tab, oc, simpleServers())
	first := scan(t, v)
	tab.hidden[101] = true
	if ev := describe(first, scan(t, v)); len(ev) != 0 {
		t.Fatalf("a child missing from the list only: %v", ev)
	}
	tab.remove(101)
	if got := describe(first, scan(t, v)); !slices.Equal(got, []string{"exited a 101"}) {
		t.Fatalf("events %v", got)
	}
}

// A reused pid (same pid, another start) is an exit and a start.
func TestViewPidReuse(t *testing.T) {
	tab, oc := simpleTable()
	v := newView(t, tab, oc, simpleServers())
	first := scan(t, v)
	tab.hidden[101] = true // gone from the list for one scan...
	tab.update(101, func(p *Process) { p.Birth += 500; p.Start = p.Start.Add(5 * time.Second) })
	second := scan(t, v) // ...and the pid is another process now
	tab.hidden[101] = false
	third := scan(t, v)
	got := append(describe(first, second), describe(second, third)...)
	if want := []string{"exited a 101", "started a 101"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// A changed config assigns children again; a child that lives on is no
// event, and the view reads nothing again for it.
func TestViewConfigChangeIsNoEvent(t *testing.T) {
	tab, oc := simpleTable()
	v := newView(t, tab, oc, simpleServers())
	first := scan(t, v)
	reads := tab.reads
	v.SetServers(simpleServers()[:1])
	second := scan(t, v)
	if ev := describe(first, second); len(ev) != 0 {
		t.Fatalf("events %v", ev)
	}
	if _, ok := second.Child(Key{"/p", "b"}); ok || len(second.Others) != 1 {
		t.Fatalf("after the change b is %v, others %v", second.Servers, second.Others)
	}
	if n := tab.reads - reads; n != 1 {
		t.Fatalf("the scan after a config change read %d processes, want 1 (OpenCode)", n)
	}
}

// OpenCode exiting ends the view, its children not reported one by one;
// so does its pid taken by another process.
func TestViewOpenCodeExit(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		tab, oc := simpleTable()
		v := newView(t, tab, oc, simpleServers())
		first := scan(t, v)
		if reuse {
			tab.update(oc, func(p *Process) { p.Birth++ })
		} else {
			tab.remove(oc)
		}
		tab.update(101, func(p *Process) { p.PPID = 1 })
		second := scan(t, v)
		if got := describe(first, second); !second.Gone || len(got) != 0 {
			t.Fatalf("reuse=%v: gone=%v events %v", reuse, second.Gone, got)
		}
		if ev := describe(second, scan(t, v)); len(ev) != 0 {
			t.Fatalf("after the exit: %v", ev)
		}
	}
}

// npm's opencode is a node script that runs the native binary as its
// child: the binary's children are the watched OpenCode's.
func TestViewNodeWrapper(t *testing.T) {
	boot := time.Unix(bootTime, 0)
	tab := newMemTable(
		Process{PID: 50, PPID: 1, UID: ana, Birth: 50, Start: boot, Comm: "node", Argv: []string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, Cwd: "/p"},
		Process{PID: 51, PPID: 50, UID: ana, Birth: 51, Start: boot, Comm: "opencode", Argv: []string{"/usr/lib/node_modules/opencode-linux-x64/bin/opencode"}, Cwd: "/p"},
		Process{PID: 52, PPID: 51, UID: ana, Birth: 52, Start: boot, Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
	)
	v := newView(t, tab, 50, simpleServers())
	s := scan(t, v)
	if c, ok := s.Child(Key{"/p", "a"}); !ok || c.PID != 52 || c.Parent != 51 {
		t.Fatalf("a served by %+v %v", c, ok)
	}
	if len(s.Others) != 0 {
		t.Fatalf("the wrapped binary is listed as another child: %v", s.Others)
	}
}

// Servers configured alike (same command, same place) share their
// children; duplicates are counted against their number.
func TestViewServersConfiguredAlike(t *testing.T) {
	tab, oc := simpleTable()
	servers := append(simpleServers(), LocalServer{Directory: "/p", Name: "a2", Command: []string{"srv", "a"}})
	v := newView(t, tab, oc, servers)
	s := scan(t, v)
	if !slices.Equal(pids(s.Servers[Key{"/p", "a2"}]), []int{101}) || len(s.Alike(Key{"/p", "a"})) != 2 || len(s.Duplicates()) != 0 {
		t.Fatalf("alike: %v %v dup %v", s.Servers, s.Alike(Key{"/p", "a"}), s.Duplicates())
	}
	tab.remove(101)
	if got := describe(s, scan(t, v)); !slices.Equal(got, []string{"exited a 101", "exited a2 101"}) {
		t.Fatalf("events %v", got)
	}
}

// simpleTable: OpenCode 100 in /p with children 101 (srv a) and 102 (srv b).
func simpleTable() (*memTable, int) {
	boot := time.Unix(bootTime, 0)
	proc := func(pid, ppid int, argv ...string) Process {
		return Process{PID: pid, PPID: ppid, UID: ana, Birth: uint64(pid) * 100, Start: boot.Add(time.Duration(pid) * time.Second),
			Comm: filepath.Base(argv[0]), Argv: argv, Cwd: "/p"}
	}
	return newMemTable(proc(100, 1, "opencode", "serve"), proc(101, 100, "srv", "a"), proc(102, 100, "srv", "b")), 100
}

func simpleServers() []LocalServer {
	return []LocalServer{
		{Directory: "/p", Name: "a", Command: []string{"srv", "a"}},
		{Directory: "/p", Name: "b", Command: []string{"srv", "b"}},
	}
}

// syntheticMany writes an OpenCode with dirs×perDir children, one server
// each, for the benchmarks.
func syntheticMany(t testing.TB, root string, dirs, perDir int) []LocalServer {
	procs := []fakeProc{{PID: 100, PPID: 1, UID: ana, Start: 1000, Argv: []string{"opencode", "serve"}, Cwd: "/home/ana",
		Threads: []int{100, 101, 102, 103, 104, 105, 106, 107}}}
	var servers []LocalServer
	pid := 1000
	for d := range dirs {
		dir := "/home/ana/projects/project " + strconv.Itoa(d)
		for s := range perDir {
			cmd := []string{"node", "/home/ana/mcp/server-" + strconv.Itoa(s) + ".js", "--stdio"}
			servers = append(servers, LocalServer{Directory: dir, Name: "server " + strconv.Itoa(s), Command: cmd})
			procs = append(procs, fakeProc{PID: pid, PPID: 100, UID: ana, Start: uint64(2000 + pid), Argv: cmd, Cwd: dir})
			pid++
		}
	}
	writeTree(t, root, procs, nil)
	return servers
}

// A scan that takes long stretches the period to 1,000 times its
// duration (at most a minute): the view stays under 0.1 % of a core.
func TestScanPeriodStretchesForSlowScans(t *testing.T) {
	for _, c := range []struct{ every, took, want time.Duration }{
		{2 * time.Second, 0, 2 * time.Second},
		{2 * time.Second, time.Millisecond, 2 * time.Second},
		{2 * time.Second, 10 * time.Millisecond, 10 * time.Second},
		{2 * time.Second, time.Second, time.Minute},
		{30 * time.Second, 10 * time.Millisecond, 30 * time.Second},
	} {
		if got := scanPeriod(c.every, c.took); got != c.want {
			t.Errorf("scanPeriod(%v, %v) = %v, want %v", c.every, c.took, got, c.want)
		}
	}
}

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
		if _, err := Orphans(pt, configured(servers), Scope{UID: ana, Watched: []int{100}}); err != nil {
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

// OpenCode starts a server with
// fork (or vfork/posix_spawn) and exec: between the two the child is a
// copy of OpenCode, and /proc/PID/cmdline shows OpenCode's own argv
// ("opencode serve"), its comm "opencode", its cwd OpenCode's. A scan
// that reads the child in that window (View.Scan reads each new child
// once) takes it for the npm wrapper's native OpenCode binary
// (known.parent): settled() only re-reads an empty argv or npm's first
// title. The child is never read again: after its exec it runs the
// server, yet no snapshot ever lists it (a "parent" is in neither
// Servers nor Others), its crash is never reported, and its own
// children are taken for OpenCode's.
func TestAChildReadBeforeItsExecIsReadAgain(t *testing.T) {
	tab, oc := simpleTable()
	boot := time.Unix(bootTime, 0)
	// 103 is forked, not yet exec'd: a copy of OpenCode 100.
	tab.put(Process{PID: 103, PPID: 100, UID: ana, Birth: 10300, Start: boot.Add(103 * time.Second), Comm: "opencode", Argv: []string{"opencode", "serve"}, Cwd: "/p"})
	servers := append(simpleServers(), LocalServer{Directory: "/p", Name: "c", Command: []string{"srv", "c"}})
	v := newView(t, tab, oc, servers)
	scan(t, v)
	// It execs the server's command.
	tab.update(103, func(p *Process) { p.Comm, p.Argv = "srv", []string{"srv", "c"} })
	var s Snapshot
	for range 5 {
		s = scan(t, v)
	}
	if c, ok := s.Child(Key{"/p", "c"}); !ok || c.PID != 103 {
		t.Errorf("after its exec, pid 103 runs /p's server c, but the view does not see it serve c (servers %v, others %d): it was read once, as a copy of OpenCode, and taken for OpenCode itself", keysOf(s), len(s.Others))
	}
}

func keysOf(s Snapshot) []Key {
	var ks []Key
	for k := range s.Servers {
		ks = append(ks, k)
	}
	return ks
}

// The servers of 1,000 directories × 10 configured alike (the daemon's
// scale benchmark) are indexed, not copied: the view holds well under
// 1 MiB for them beyond the caller's list (a copy of the list is about
// 1 MiB, a string key per server in the index 1 MiB more). Setting them
// again with one directory more indexes the servers again but resolves
// only the new directory, and an equal list (the engine lists its
// servers again after every config read) builds nothing.
func TestServersAtScaleAreIndexedNotCopied(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 servers")
	}
	const liveLimit, armedAllocs = 1 << 20, 8000
	servers := alikeServers(benchDirs, benchPerDir)
	fewer := servers[:len(servers)-benchPerDir]
	tab := newMemTable(Process{PID: 100, PPID: 1, UID: ana, Argv: []string{"opencode", "serve"}, Cwd: "/"})
	if live := liveBytes(func() any { return newView(t, tab, 100, servers) }); live > liveLimit {
		t.Errorf("the view holds %d KiB for %d servers, want at most %d KiB: a copy of the servers, or a key per server, is back", live>>10, len(servers), liveLimit>>10)
	}
	v := newView(t, tab, 100, fewer)
	if n := testing.AllocsPerRun(3, func() { v.SetServers(servers); v.SetServers(fewer) }); n > 2*armedAllocs {
		t.Errorf("setting %d servers again with one directory more allocates %.0f times, want at most %d", len(servers), n/2, armedAllocs)
	}
	again := append([]LocalServer(nil), fewer...)
	if n := testing.AllocsPerRun(3, func() { v.SetServers(again); v.SetServers(fewer) }); n != 0 {
		t.Errorf("setting %d equal servers again allocates %.0f times, want none: the matcher was built again", len(fewer), n/2)
	}
}

// viewOfOne is OpenCode 2000 with one child, 2100, serving /p's a.
func viewOfOne(t *testing.T) (*memTable, *View) {
	boot := time.Unix(bootTime, 0)
	tab := newMemTable(
		Process{PID: 2000, PPID: 1, PGID: 2000, UID: ana, Birth: 2000, Start: boot, Comm: "opencode", Argv: []string{"opencode", "serve"}, Cwd: "/p"},
		Process{PID: 2100, PPID: 2000, PGID: 2000, UID: ana, Birth: 2100, Start: boot.Add(time.Minute), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
	)
	v := newView(t, tab, 2000, simpleServers())
	if c, ok := scan(t, v).Child(Key{"/p", "a"}); !ok || c.PID != 2100 {
		t.Fatalf("child %+v %v", c, ok)
	}
	return tab, v
}

// An exit an exit watcher saw counts at the next scan, though OpenCode
// still lists the child (a zombie it has not reaped yet); the word of a
// watcher about another process with that pid does not.
func TestViewCountsAWatchedExitBeforeOpenCodeReapsIt(t *testing.T) {
	tab, v := viewOfOne(t)
	prev := scan(t, v)
	v.Exited(2100, 9999, time.Now()) // another process's birth
	if _, ok := scan(t, v).Child(Key{"/p", "a"}); !ok {
		t.Fatal("an exit of another process with the same pid ended the child")
	}
	tab.update(2100, func(p *Process) { p.Zombie = true })
	v.Exited(2100, 2100, time.Now())
	next := scan(t, v)
	if _, ok := next.Child(Key{"/p", "a"}); ok {
		t.Fatal("the child an exit watcher saw exit still serves")
	}
	if ev := describe(prev, next); !slices.Equal(ev, []string{"exited a 2100"}) {
		t.Fatalf("events %v", ev)
	}
	if _, ok := scan(t, v).Child(Key{"/p", "a"}); ok {
		t.Fatal("the zombie serves again at the scan after")
	}
}

// Successor reads the table now: a child OpenCode started after the one
// that exited is its successor; an older one (a duplicate) is not.
func TestViewSuccessorReadsTheTableNow(t *testing.T) {
	tab, v := viewOfOne(t)
	boot := time.Unix(bootTime, 0)
	const exitedBirth = 2150 // born after 2100, before 2200
	if v.Successor("/p", "a", exitedBirth) {
		t.Fatal("the older child counts as a successor")
	}
	tab.put(Process{PID: 2200, PPID: 2000, PGID: 2000, UID: ana, Birth: 2200, Start: boot.Add(3 * time.Minute), Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"})
	if !v.Successor("/p", "a", exitedBirth) {
		t.Fatal("a child started since is no successor")
	}
	if v.Successor("/p", "b", exitedBirth) {
		t.Fatal("a successor of another server")
	}
}
