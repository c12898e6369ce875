package daemon

import (
	"context"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A crash is the end of the child OpenCode started (its launcher) and of
// what runs below it, which OpenCode's pipe sees. Below a launcher that
// runs on (`sh -c 'node srv.js; sleep 600'`, or a build step before the
// server: `sh -c 'npm run build; node dist/index.js'`) the end of one
// process is not: the next one holds OpenCode's pipe, and nothing in the
// process table tells a build step that ended from a server that
// crashed. So it is shown (status names what runs below the launcher
// now) and nothing is done; the launcher's own end is a crash. Here
// without an exit watcher: scans alone.
func TestOnlyTheLaunchersEndIsACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		cmd := []string{"sh", "-c", "node srv.js; sleep 600"}
		root := t.TempDir()
		writeProcTree(t, root, underOpenCode(uid,
			fakeProc{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: cmd, Cwd: "/p"},
			fakeProc{PID: 2101, PPID: 2100, UID: uid, Start: 201, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
		))
		oc := &connectedOC{cmd: cmd}
		r, tab := connectedEngine(t, root, oc)
		defer r.stop()

		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Servers) != 1 || info.Servers[0].ServerPID != 2101 {
			t.Fatalf("setup: status does not show node 2101 below the shell: %+v", info)
		}

		// node crashes; the shell goes on to `sleep 600`.
		removeProcs(t, root, 2101)
		writeProcTree(t, root, []fakeProc{{PID: 2102, PPID: 2100, UID: uid, Start: 900, Argv: []string{"sleep", "600"}, Cwd: "/p"}})
		setChildren(t, root, 2100, "2102 ")
		time.Sleep(60 * time.Second)
		synctest.Wait()
		n := oc.connectCount()
		if n != 0 {
			t.Errorf("%d connects after node (pid 2101) ended below `sh -c 'node srv.js; sleep 600'`: the shell runs on and holds OpenCode's pipe, as it would after a build step", n)
		}
		if info := p.info(); info == nil || len(info.Servers) != 1 || info.Servers[0].ServerPID != 2102 {
			t.Errorf("status does not show what runs below the shell now (sleep, pid 2102): %+v", info)
		}

		// The launcher ends: that is a crash.
		removeProcs(t, root, 2100, 2102)
		setChildren(t, root, 2000, "")
		time.Sleep(60 * time.Second)
		synctest.Wait()
		n = oc.connectCount()
		if n == 0 {
			t.Errorf("the launcher (pid 2100) ended a minute ago while OpenCode says connected: no connect")
		}
	})
}

// kernelClock is a /proc table whose boot-time clock (Now) runs from the
// machine's real boot, while its btime (what Start is computed from) is
// that boot truncated to the second, as /proc/stat has it.
type kernelClock struct {
	procview.Table
	boot time.Time
}

func (k kernelClock) Now() uint64 { return ticksSince(k.boot) }

// ticksSince is the boot-time clock, in clock ticks, of a machine that
// booted at boot.
func ticksSince(boot time.Time) uint64 { return uint64(time.Since(boot) / (10 * time.Millisecond)) }

// spawningOC is an OpenCode before 1.15 over a fake /proc tree: status
// stays connected whatever its child does, and a connect starts a new
// child (born on the kernel's clock, a tick after the connect arrived)
// and ends the one it replaces.
type spawningOC struct {
	root string
	boot time.Time
	cmd  []string

	mu       sync.Mutex
	next     int
	children []int
	connects int
	err      error
}

func (o *spawningOC) MCPStatus(context.Context, string) (map[string]opencode.MCPServerStatus, error) {
	return map[string]opencode.MCPServerStatus{"s": {Status: opencode.StatusConnected}}, nil
}

func (o *spawningOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	return map[string]opencode.MCPEntry{"s": {Type: "local", Command: o.cmd}}, nil
}

func (o *spawningOC) Connect(context.Context, string, string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.connects++
	for _, pid := range o.children {
		_ = os.RemoveAll(filepath.Join(o.root, strconv.Itoa(pid)))
	}
	o.next++
	o.children = []int{o.next}
	if err := o.spawnLocked(o.next, ticksSince(o.boot)+1); err != nil && o.err == nil {
		o.err = err
	}
	time.Sleep(300 * time.Millisecond) // the MCP handshake
	return nil
}

// spawnLocked writes child pid (born at the tick birth) under OpenCode
// 2000 and makes it OpenCode's only child.
func (o *spawningOC) spawnLocked(pid int, birth uint64) error {
	dir := filepath.Join(o.root, strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(pid)), 0o755); err != nil {
		return err
	}
	stat := fmt.Sprintf("%d (%s) S 2000 2000 2000 0 -1 4194304 639 0 0 0 0 0 0 0 20 0 1 0 %d 1828069376 2486\n", pid, filepath.Base(o.cmd[0]), birth)
	status := fmt.Sprintf("Name:\t%s\nState:\tS\nTgid:\t%d\nPid:\t%d\nPPid:\t2000\nUid:\t%d\t%d\t%d\t%d\n", filepath.Base(o.cmd[0]), pid, pid, os.Getuid(), os.Getuid(), os.Getuid(), os.Getuid())
	for name, b := range map[string]string{"stat": stat, "status": status, "cmdline": strings.Join(o.cmd, "\x00") + "\x00", filepath.Join("task", strconv.Itoa(pid), "children"): ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			return err
		}
	}
	if err := os.Symlink("/p", filepath.Join(dir, "cwd")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.root, "2000", "task", "2000", "children"), []byte(strconv.Itoa(pid)+" "), 0o644)
}

// crash kills OpenCode's child: it is gone from the table, and from
// OpenCode's children.
func (o *spawningOC) crash() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, pid := range o.children {
		_ = os.RemoveAll(filepath.Join(o.root, strconv.Itoa(pid)))
	}
	o.children = nil
	_ = os.WriteFile(filepath.Join(o.root, "2000", "task", "2000", "children"), nil, 0o644)
}

func (o *spawningOC) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.connects
}

// On OpenCode before 1.15 a server's second crash is repaired, and its
// third: the child the daemon's own repair started is taken for one
// started after that repair's connect, as it was. Start times computed
// from /proc/stat's btime (whole seconds, truncated) are early by the
// boot's fraction of a second, 0.99 s here: set against the wall-clock
// time of the connect they made that child look older than the connect,
// and its exit was dropped as that of a child the connect replaced. The
// connect and the birth are compared on the kernel's one clock.
func TestCrashOfTheChildARepairStartedIsRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		btime := time.Now().Add(-time.Hour).Truncate(time.Second)
		boot := btime.Add(990 * time.Millisecond) // the boot's fraction: 0.99 s
		writeGroupedTree(t, root, []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2000, PPID: 1, PGID: 2000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
		})
		if err := os.WriteFile(filepath.Join(root, "stat"), fmt.Appendf(nil, "cpu  1 0 1 1 0 0 0 0 0 0\nbtime %d\nprocesses 1\n", btime.Unix()), 0o644); err != nil {
			t.Fatal(err)
		}
		oc := &spawningOC{root: root, boot: boot, cmd: srv, next: 2100}
		if err := oc.spawnLocked(2100, ticksSince(boot)-60*100); err != nil { // OpenCode started it a minute ago
			t.Fatal(err)
		}
		oc.children = []int{2100}
		tab := kernelClock{Table: procFS(t, root), boot: boot}
		r := newWatchRig()
		defer r.stop()
		r.runEngine(t, oc, "/p")
		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		time.Sleep(90 * time.Second) // connected, stable, the child seen
		synctest.Wait()

		for crash := 1; crash <= 3; crash++ {
			oc.crash()
			p.view.Load().Look()
			time.Sleep(5 * time.Second)
			synctest.Wait()
			if n := oc.count(); n != crash {
				t.Fatalf("crash %d of the server: %d connects, want %d (the child the last repair started crashed and nothing repaired it)", crash, n, crash)
			}
			time.Sleep(90 * time.Second) // the new child serves, stable
		}
		if oc.err != nil {
			t.Fatal(oc.err)
		}
	})
}

// (Watch finds OpenCode "when its listening socket …
// leads to a local process"; the brief: not a process that is not
// OpenCode). The 2.x pid is taken only when IsOpenCode says so, but the
// process listening on the loopback port is taken whatever it is: an
// `ssh -L 4096:…` tunnel to a remote OpenCode, socat, a reverse proxy.
// The daemon then watches that program's children as OpenCode's, and
// counts every real local OpenCode's MCP servers as children of "an
// OpenCode that is not watched" (orphans in status).
func TestProcessViewTakesOnlyOpenCodeListeners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the listener is found through /proc")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // this test binary: not OpenCode
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	p := newProcWatch(nil, client, 0, slog.New(slog.DiscardHandler))
	pid, err := p.find(tab)
	if err == nil {
		self, _ := tab.Read(os.Getpid())
		t.Fatalf("find chose pid %d (argv %q, IsOpenCode %v) as the OpenCode process", pid, procview.Display(self.Argv), procview.IsOpenCode(self))
	}
}

// When a child serving a server
// exits and another child of the same server still runs, the watch
// reports nothing ("Another child still serves it (OpenCode already
// started a new one, or a duplicate was ended)"). But the child left
// may be the *older* one: a duplicate OpenCode leaked earlier (status
// and doctor list it as such), no longer connected to anything. OpenCode
// talks to its newest child; when that one crashes, 1.14 keeps saying
// connected, and the leaked duplicate's survival hides the crash: the
// server is never brought back. Only a child that started after the one
// that exited can be its successor (as Successor itself asks).
func TestCrashOfTheNewestChildIsNotHiddenByAnOlderDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		writeProcTree(t, root, underOpenCode(uid,
			fakeProc{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"}, // leaked duplicate
			fakeProc{PID: 2101, PPID: 2000, UID: uid, Start: 300, Argv: srv, Cwd: "/p"}, // the one serving
		))
		oc := &connectedOC{cmd: srv}
		r, tab := connectedEngine(t, root, oc)
		defer r.stop()

		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Duplicates) != 1 {
			t.Fatalf("setup: the duplicate is not shown: %+v", info)
		}
		// The serving child, the newest, crashes; the leaked one lives on.
		removeProcs(t, root, 2101)
		setChildren(t, root, 2000, "2100 ")
		time.Sleep(30 * time.Second)
		synctest.Wait()
		n := oc.connectCount()
		if n == 0 {
			t.Errorf("the newest child (2101), the one OpenCode talks to, exited 30 s ago while OpenCode says connected: no connect, because an older leaked duplicate (2100) still runs")
		}
	})
}

// fakeProc is one process of a /proc tree written by writeProcTree.
type fakeProc struct {
	PID, PPID, UID int
	Start          uint64
	Argv           []string
	Cwd            string
}

// writeProcTree writes procs as a /proc tree under root (stat, status,
// cmdline, cwd, each process's children list), as procview's tests do,
// each process in its parent's pid's group.
func writeProcTree(t *testing.T, root string, procs []fakeProc) {
	t.Helper()
	grouped := make([]groupedProc, len(procs))
	for i, p := range procs {
		grouped[i] = groupedProc{PID: p.PID, PPID: p.PPID, PGID: p.PPID, UID: p.UID, Start: p.Start, Argv: p.Argv, Cwd: p.Cwd}
	}
	writeGroupedTree(t, root, grouped)
}

// alikeOC is the scale benchmark's OpenCode (test/bench): every
// directory has the same perDir local servers, all connected.
type alikeOC struct{ perDir int }

func (o alikeOC) MCPStatus(context.Context, string) (map[string]opencode.MCPServerStatus, error) {
	out := map[string]opencode.MCPServerStatus{}
	for s := range o.perDir {
		out["s"+strconv.Itoa(s)] = opencode.MCPServerStatus{Status: opencode.StatusConnected}
	}
	return out, nil
}

func (o alikeOC) Connect(context.Context, string, string) error { return nil }

func (o alikeOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	out := map[string]opencode.MCPEntry{}
	for s := range o.perDir {
		out["s"+strconv.Itoa(s)] = opencode.MCPEntry{Type: "local", Command: []string{"node", "/home/ana/mcp/server-" + strconv.Itoa(s) + ".js", "--stdio"}}
	}
	return out, nil
}

// At the benchmark's scale (1,000 directories × 10 servers configured
// alike) the process view's servers are held once and indexed in a
// little memory: what the view keeps of the engine's list (View.Run
// hands it over as LocalServers returns it) beyond the engine's own state
// stays under 2 MiB (the one list of them, 0.7 MiB, the view's index,
// 0.6 MiB, and the commands while the engine hands out copies). A copy
// of the list costs 0.7 MiB more, a map of launchers 1 MiB, a map of
// servers in the matcher 1.8 MiB: 5.9 MiB with all three.
func TestProcessViewServersAtScaleStaySmall(t *testing.T) {
	const dirs, perDir, limit = 1000, 10, 2 << 20
	root := t.TempDir()
	writeProcTree(t, root, underOpenCode(os.Getuid()))
	tab := procFS(t, root)
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig()
		defer r.stop()
		eng := r.runEngine(t, alikeOC{perDir}, "")
		for d := range dirs {
			_ = eng.Arm(fmt.Sprintf("/bench/dir %04d", d), reconnect.ArmedByFlag)
		}
		time.Sleep(90 * time.Second) // every directory checked, its config read
		synctest.Wait()
		if _, locals, _ := eng.LocalServers(0); len(locals) != dirs*perDir {
			t.Fatalf("the engine lists %d local servers, want %d", len(locals), dirs*perDir)
		}
		v, err := procview.NewView(tab, 2000)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, locals, _ := eng.LocalServers(0)
		v.SetServers(locals)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(v)
		live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("the view's servers hold %.2f MiB", float64(live)/(1<<20))
		if live > limit {
			t.Errorf("the process view holds %.2f MiB for %d local servers, want at most %.0f MiB: a copy of the servers is back", float64(live)/(1<<20), dirs*perDir, float64(limit)/(1<<20))
		}
	})
}

// missing skips a test whose dependency (a program, a kernel feature,
// root) is absent here; under CI, where .ci/run provides every one, it
// fails.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("missing under CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// watchRig is what a procWatch test runs: an engine (optional) and the
// watches, all on one context; stop cancels it and waits for them.
type watchRig struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	eng    *reconnect.Engine
}

func newWatchRig() *watchRig {
	r := &watchRig{}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// stop cancels the rig's context and waits for the engine and the
// watches to return.
func (r *watchRig) stop() { r.cancel(); r.wg.Wait() }

// runEngine builds an engine over oc (DefaultConfig without jitter),
// arms dir unless it is empty, and starts Engine.Run.
func (r *watchRig) runEngine(t *testing.T, oc reconnect.OpenCode, dir string) *reconnect.Engine {
	t.Helper()
	cfg := reconnect.DefaultConfig
	cfg.Backoff.Jitter = 0
	eng, err := reconnect.New(cfg, oc, reconnect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if dir != "" {
		_ = eng.Arm(dir, reconnect.ArmedByFlag)
	}
	r.eng = eng
	r.wg.Add(1)
	go func() { defer r.wg.Done(); _ = eng.Run(r.ctx) }()
	return eng
}

// newWatch makes the procWatch of OpenCode pid for the rig's engine, with
// a client of an OpenCode nobody listens for (none without an engine).
// It is not started: set its fields, then call goWatch.
func (r *watchRig) newWatch(t *testing.T, pid int) *procWatch {
	t.Helper()
	var client *opencode.Server
	if r.eng != nil {
		var err error
		client, err = opencode.NewServer(opencode.ServerOptions{URL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
	}
	return newProcWatch(r.eng, client, pid, slog.New(slog.DiscardHandler))
}

// goWatch runs p.watch(tab, pid) until the rig stops; the channel
// returned is closed when the watch returns.
func (r *watchRig) goWatch(p *procWatch, tab procview.Table, pid int) <-chan struct{} {
	done := make(chan struct{})
	r.wg.Add(1)
	go func() { defer r.wg.Done(); defer close(done); _ = p.watch(r.ctx, tab, pid) }()
	return done
}

// procFS reads the fake /proc tree under root.
func procFS(t *testing.T, root string) procview.Table {
	t.Helper()
	tab, err := procview.ProcFS(root)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// initProc is pid 1 of every fake /proc tree.
var initProc = fakeProc{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"}

// underOpenCode is a /proc tree of init, `opencode serve` (pid 2000, in
// /p, started at 100) of uid, and children.
func underOpenCode(uid int, children ...fakeProc) []fakeProc {
	return append([]fakeProc{
		initProc,
		{PID: 2000, PPID: 1, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
	}, children...)
}

// setChildren rewrites the children list of pid in the fake /proc tree.
func setChildren(t *testing.T, root string, pid int, list string) {
	t.Helper()
	p := strconv.Itoa(pid)
	if err := os.WriteFile(filepath.Join(root, p, "task", p, "children"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
}

// removeProcs removes pids from the fake /proc tree.
func removeProcs(t *testing.T, root string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if err := os.RemoveAll(filepath.Join(root, strconv.Itoa(pid))); err != nil {
			t.Fatal(err)
		}
	}
}

// connectCount is how many connects o has had.
func (o *connectedOC) connectCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.connects
}

// connectedEngine runs, over the fake /proc tree at root, an engine of
// oc armed at /p for 90 s: connected, stable, its config read. Start the
// watch with r.newWatch and r.goWatch; defer r.stop.
func connectedEngine(t *testing.T, root string, oc *connectedOC) (r *watchRig, tab procview.Table) {
	t.Helper()
	tab = procFS(t, root)
	r = newWatchRig()
	r.runEngine(t, oc, "/p")
	time.Sleep(90 * time.Second) // connected, stable, its config read
	synctest.Wait()
	return r, tab
}

// belowLauncherWatch watches OpenCode 2000 whose server s runs as
// `sh -c 'node srv.js; sleep 600'` (2100) with node (2101) below it.
func belowLauncherWatch(t *testing.T, root string) (p *procWatch, rec *procview.Record, done <-chan struct{}, stop func()) {
	uid := os.Getuid()
	cmd := []string{"sh", "-c", "node srv.js; sleep 600"}
	writeGroupedTree(t, root, []groupedProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
		{PID: 2000, PPID: 1, PGID: 1000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
		{PID: 2100, PPID: 2000, PGID: 1000, UID: uid, Start: 200, Argv: cmd, Cwd: "/p"},
		{PID: 2101, PPID: 2100, PGID: 1000, UID: uid, Start: 201, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
	})
	tab := procFS(t, root)
	r := newWatchRig()
	r.runEngine(t, &connectedOC{cmd: cmd}, "/p")
	rec = &procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
	p = r.newWatch(t, 2000)
	p.record = rec
	return p, rec, r.goWatch(p, tab, 2000), r.stop
}

func recordedPIDs(t *testing.T, rec *procview.Record) []int {
	t.Helper()
	all, err := rec.Load()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, s := range all {
		for _, x := range s.Seen {
			pids = append(pids, x.PID)
		}
	}
	return pids
}

// Sightings.Seen is "the children it started and the processes below
// them that serve (an npx's node, a shell's server)". The exit watcher
// never looks below a launcher, so the record must look itself: else
// only a status call would, and a daemon nobody asks for status would
// never record the server below a launcher, the process that outlives a
// launcher ended by a signal ("npm's node survives npm's SIGKILL").
func TestRecordHoldsTheServerBelowALauncherWithoutAStatusCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, rec, _, stop := belowLauncherWatch(t, t.TempDir())
		defer stop()
		time.Sleep(90 * time.Second) // config read, the child assigned, records written
		synctest.Wait()
		if got := recordedPIDs(t, rec); !slices.Contains(got, 2100) {
			t.Fatalf("setup: the record holds %v, not the launcher 2100", got)
		} else if !slices.Contains(got, 2101) {
			t.Errorf("the record holds %v: not node 2101, the server below the launcher, because no status call looked below it", got)
		}
	})
}

// The record written when OpenCode is seen gone is to keep "what
// OpenCode ran when it ends": the Gone snapshot lists no server, and
// what ran below each launcher must not be forgotten before that last
// save, or the file (replaced whole) loses the server below each
// launcher that earlier saves held.
func TestRecordWrittenAtOpenCodesEndKeepsTheServerBelowItsLauncher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		root := t.TempDir()
		p, rec, done, stop := belowLauncherWatch(t, root)
		defer stop()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Servers) != 1 || info.Servers[0].ServerPID != 2101 {
			t.Fatalf("setup: status does not show node 2101 below the shell: %+v", info)
		}
		// A child starts (any change): the record is written again, now
		// with what status found below the launcher.
		writeGroupedTree(t, root, []groupedProc{{PID: 2200, PPID: 2000, PGID: 1000, UID: uid, Start: 900, Argv: []string{"rg", "x"}, Cwd: "/p"}})
		if err := os.WriteFile(filepath.Join(root, "2000", "task", "2000", "children"), []byte("2100 2200 "), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := recordedPIDs(t, rec); !slices.Contains(got, 2101) {
			t.Fatalf("setup: while OpenCode runs the record holds %v, not node 2101", got)
		}

		// OpenCode is SIGKILLed; its launcher and server stay.
		for _, pid := range []string{"2000", "2200"} {
			if err := os.RemoveAll(filepath.Join(root, pid)); err != nil {
				t.Fatal(err)
			}
		}
		writeGroupedTree(t, root, []groupedProc{
			{PID: 2100, PPID: 1, PGID: 1000, UID: uid, Start: 200, Argv: []string{"sh", "-c", "node srv.js; sleep 600"}, Cwd: "/p"},
			{PID: 2101, PPID: 2100, PGID: 1000, UID: uid, Start: 201, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
		})
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the watch did not see OpenCode exit")
		}
		if got := recordedPIDs(t, rec); !slices.Contains(got, 2101) {
			t.Errorf("after OpenCode ended the record holds %v: the save at its end dropped node 2101, below the launcher, which the record held a moment before", got)
		}
	})
}

// The record keeps when OpenCode ended (Sightings.End: "nothing born
// at or after it is its"), and the group evidence relies on it to
// refuse a later group that got the dead OpenCode's id. But End is
// written only by the scan that sees OpenCode gone. Under `run` the
// daemon is stopped the moment its child ends (RunManaged: <-child.Done(),
// then stop()), and nothing makes a scan happen first: the exit watcher
// watches OpenCode's children, not OpenCode, and a server OpenCode left
// behind (the orphan the record is for) does not exit. The watch returns
// on ctx.Done without a word, so in the daemon's main mode the record of
// a dead OpenCode never says when it ended, and its group proves every
// later member of a group with that id (a setsid job whose leader got
// the pid).
func TestRecordOfRunsOpenCodeSaysWhenItEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		writeGroupedTree(t, root, []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2000, PPID: 1, PGID: 2000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 2000, PGID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		})
		writeClock(t, root, "3000.00", "boot-a")
		tab := procFS(t, root)
		r := newWatchRig()
		r.runEngine(t, &connectedOC{cmd: srv}, "/p")
		rec := procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
		p := r.newWatch(t, 2000)
		p.record = &rec
		done := r.goWatch(p, tab, 2000)
		defer r.stop()

		time.Sleep(30 * time.Second)
		synctest.Wait()

		// run's child, OpenCode, is SIGKILLed; its server stays. The
		// wrapper sees its child end at once and stops the daemon.
		if err := os.RemoveAll(filepath.Join(root, "2000")); err != nil {
			t.Fatal(err)
		}
		writeGroupedTree(t, root, []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2100, PPID: 1, PGID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		})
		time.Sleep(100 * time.Millisecond) // the wrapper's wait returns
		r.cancel()
		<-done
		all, err := rec.Load()
		if err != nil || len(all) != 1 {
			t.Fatalf("record: %+v, %v", all, err)
		}
		if all[0].End != 300000 || all[0].Boot != "boot-a" {
			t.Errorf("the record of run's OpenCode, which ended before the daemon stopped, says end %d on boot %q, want the table's clock then (300000) on boot-a: its group proves any later member of a group %d", all[0].End, all[0].Boot, all[0].OpenCode.PGID)
		}
	})
}

// The record is rewritten only when a
// scan reports a server child started or exited (dirty), and neither is
// reported for a child that was known before: a child first seen
// as one of OpenCode's Others (the scan ran before the engine had read
// that directory's config, which is the very call that makes OpenCode
// spawn it; or its directory is not armed yet) and then assigned to its
// server once the config is known is never written down, nor is any
// Other child started after the first save. The record ("every MCP
// process seen under a live OpenCode goes into the record") then lacks
// exactly the servers OpenCode started after the daemon began watching,
// and doctor --reap cannot prove them once OpenCode is gone.
func TestRecordHoldsAChildSeenBeforeItsConfigWasRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		base := []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 1000, PPID: 1, PGID: 1000, UID: uid, Start: 10, Argv: []string{"/bin/sh", "/home/ana/bin/serve"}, Cwd: "/p"},
			{PID: 2000, PPID: 1000, PGID: 1000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
		}
		writeGroupedTree(t, root, base)
		tab := procFS(t, root)
		r := newWatchRig()
		eng := r.runEngine(t, &connectedOC{cmd: srv}, "")
		rec := procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
		p := r.newWatch(t, 2000)
		p.record = &rec
		r.goWatch(p, tab, 2000)
		defer r.stop()
		time.Sleep(5 * time.Second) // watching; the first record written
		synctest.Wait()

		// A client opens /p: OpenCode spawns its server while the
		// config is being read; a scan sees the child first.
		writeGroupedTree(t, root, append(base, groupedProc{PID: 2100, PPID: 2000, PGID: 1000, UID: uid, Start: 600, Argv: srv, Cwd: "/p"}))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		_ = eng.Arm("/p", reconnect.ArmedByFlag)
		time.Sleep(30 * time.Second) // config read, the child assigned to its server
		synctest.Wait()
		if info := p.info(); info == nil || info.Children != 1 {
			t.Fatalf("setup: the view does not see pid 2100 serve /p's server: %+v", info)
		}
		seen := recordedPIDs(t, &rec)
		if len(seen) != 1 || seen[0] != 2100 {
			t.Errorf("the record holds %v while OpenCode runs pid 2100 for /p's server, want [2100]: the child was never written down", seen)
		}
	})
}

// groupedProc is one process of a /proc tree, with its own process group.
type groupedProc struct {
	PID, PPID, PGID, UID int
	Start                uint64
	Argv                 []string
	Cwd                  string
}

// writeGroupedTree writes procs under root as writeProcTree does, but with each
// process's own group (writeProcTree puts every process in its parent's
// pid's group).
func writeGroupedTree(t *testing.T, root string, procs []groupedProc) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(root, 0o755))
	must(os.WriteFile(filepath.Join(root, "stat"), []byte("cpu  1 0 1 1 0 0 0 0 0 0\nbtime 1796110733\nprocesses 1\n"), 0o644))
	must(os.MkdirAll(filepath.Join(root, "sys", "kernel", "random"), 0o755))
	must(os.WriteFile(filepath.Join(root, "sys", "kernel", "random", "boot_id"), []byte("5d2f0b7e-3c1a-4e8b-9f6d-0a1b2c3d4e5f\n"), 0o644))
	kids := map[int][]int{}
	for _, p := range procs {
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.PID))
		_ = os.RemoveAll(dir)
		must(os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(p.PID)), 0o755))
		comm := filepath.Base(p.Argv[0])
		stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194304 639 0 0 0 0 0 0 0 20 0 1 0 %d 1828069376 2486\n", p.PID, comm, p.PPID, p.PGID, p.PGID, p.Start)
		must(os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
		status := fmt.Sprintf("Name:\t%s\nState:\tS\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", comm, p.PID, p.PID, p.PPID, p.UID, p.UID, p.UID, p.UID)
		must(os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
		must(os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(p.Argv, "\x00")+"\x00"), 0o644))
		must(os.Symlink(p.Cwd, filepath.Join(dir, "cwd")))
		var list []byte
		for _, c := range kids[p.PID] {
			list = append(strconv.AppendInt(list, int64(c), 10), ' ')
		}
		must(os.WriteFile(filepath.Join(dir, "task", strconv.Itoa(p.PID), "children"), list, 0o644))
	}
}

// writeClock gives the fake /proc tree at root a boot clock (uptime,
// seconds with two decimals, as the kernel writes it) and a boot id.
func writeClock(t *testing.T, root, uptime, bootID string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, "uptime"), []byte(uptime+" 0.00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "sys", "kernel", "random")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boot_id"), []byte(bootID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The record is "what proves, after
// OpenCode is gone, that a process was its MCP server", and the daemon
// writes it once more when it sees its OpenCode exit ("what proves its
// orphans"). But the scan that sees OpenCode gone knows nothing else
// (Snapshot.Gone: no Servers, no Others), and Record.Save replaces the
// file: the last word the daemon writes about a dead OpenCode is that it
// had no MCP processes. Every sighting is erased at the very moment it
// becomes the evidence. Where OpenCode does not lead its process group
// (started by a script or a shell without job control) and puts no
// OPENCODE_PID in the environment (1.1.65, the v2 line), the record is
// the only proof there is: doctor --reap then finds the left-over server
// "not proven" and never ends it.
func TestRecordKeepsTheSightingsOfAnOpenCodeThatDied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		procs := []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			// a script that started OpenCode: it leads the group.
			{PID: 1000, PPID: 1, PGID: 1000, UID: uid, Start: 10, Argv: []string{"/bin/sh", "/home/ana/bin/serve"}, Cwd: "/p"},
			{PID: 2000, PPID: 1000, PGID: 1000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 2000, PGID: 1000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		}
		writeGroupedTree(t, root, procs)
		tab := procFS(t, root)
		r := newWatchRig()
		r.runEngine(t, &connectedOC{cmd: srv}, "/p")
		rec := procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
		p := r.newWatch(t, 2000)
		p.record = &rec
		done := r.goWatch(p, tab, 2000)
		defer r.stop()

		time.Sleep(30 * time.Second)
		synctest.Wait()
		seen := func() []int { return recordedPIDs(t, &rec) }
		if got := seen(); len(got) != 1 || got[0] != 2100 {
			t.Fatalf("setup: while OpenCode runs the record holds %v, want [2100]", got)
		}

		// OpenCode is SIGKILLed: its server is adopted by init and stays
		// in the script's group.
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.RemoveAll(filepath.Join(root, "2000")))
		writeGroupedTree(t, root, []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 1000, PPID: 1, PGID: 1000, UID: uid, Start: 10, Argv: []string{"/bin/sh", "/home/ana/bin/serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 1, PGID: 1000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		})
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the watch did not see OpenCode exit")
		}
		if got := seen(); len(got) != 1 || got[0] != 2100 {
			t.Errorf("after OpenCode died the record holds %v, want [2100]: the daemon erased the sighting that proves the orphan", got)
		}
		all, _ := rec.Load()
		found, err := procview.Orphans(tab, func([]string) []procview.LocalServer {
			return []procview.LocalServer{{Directory: "/p", Name: "s", Command: srv}}
		}, procview.Scope{UID: uid, Record: all})
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || !found[0].Evidence.Proven() {
			for _, o := range found {
				t.Errorf("orphan %d: %v (%s)", o.PID, o.Evidence, o.Why)
			}
			t.Errorf("doctor --reap cannot prove the server OpenCode left behind: %d orphans listed", len(found))
		}
	})
}

// countHandler counts records and cancels after limit of them.
type countHandler struct {
	n      atomic.Int64
	limit  int64
	cancel context.CancelFunc
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(context.Context, slog.Record) error {
	if h.n.Add(1) == h.limit {
		h.cancel()
	}
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// (The process view; the brief: "a busy loop when OpenCode exits".)
// Under run the view follows a fixed pid (run's child). Once that
// process has exited (or is a zombie the wrapper has not reaped yet),
// find returns the same pid at once, NewView fails at once, and run loops
// back with no wait at all: a core spun at 100 % (and a debug line per
// turn) until the daemon is stopped. The same holds under watch for a 2.x
// pid that is a zombie. Here: a pid that does not exist, a fake clock;
// the loop turns 10,000 times without the clock moving.
func TestProcessViewWaitsOnAnExitedOpenCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		h := &countHandler{limit: 10000, cancel: cancel}
		const gone = 1<<22 + 12345 // above any pid_max: never a process
		p := newProcWatch(nil, nil, gone, slog.New(h))
		start := time.Now()
		p.run(ctx)
		if n := h.n.Load(); n >= h.limit {
			t.Fatalf("%d attempts to view the exited OpenCode within %v: no wait between them", n, time.Since(start))
		}
	})
}

// Every exit of a server's child now goes to the engine, and the engine
// asks Successor(after = the start of the child that exited) at decision
// time. But ChildExited keeps only the start of the last exit it was told
// (s.deadStart = started), not of the newest child that exited. When the
// newest child, the one OpenCode talks to, crashes and an older leaked
// duplicate exits before the check (the user follows status's advice to
// end the older one, or it dies with the crash), deadStart becomes that
// older start, and any duplicate between the two passes for a
// successor: the crash is never repaired.
func TestAnOlderDuplicatesExitAfterTheNewestCrashedHidesNoCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		writeProcTree(t, root, underOpenCode(uid,
			fakeProc{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"}, // leaked duplicates
			fakeProc{PID: 2101, PPID: 2000, UID: uid, Start: 300, Argv: srv, Cwd: "/p"},
			fakeProc{PID: 2102, PPID: 2000, UID: uid, Start: 400, Argv: srv, Cwd: "/p"}, // the one serving
		))
		oc := &connectedOC{cmd: srv}
		r, tab := connectedEngine(t, root, oc)
		defer r.stop()

		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Duplicates) != 1 {
			t.Fatalf("setup: the duplicates are not shown: %+v", info)
		}
		// The newest child crashes (its exit is seen at once, as an exit
		// watcher sees it).
		removeProcs(t, root, 2102)
		setChildren(t, root, 2000, "2100 2101 ")
		p.view.Load().Look()
		time.Sleep(250 * time.Millisecond)
		synctest.Wait()
		// A moment later, within the 0.5 s grace, the oldest duplicate
		// ends too.
		removeProcs(t, root, 2100)
		setChildren(t, root, 2000, "2101 ")
		p.view.Load().Look()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		n := oc.connectCount()
		if n == 0 {
			t.Errorf("the newest child (2102), the one OpenCode talks to, crashed 30 s ago while OpenCode says connected: no connect, because the exit of the oldest duplicate (2100) after it made the older duplicate 2101 pass for its successor")
		}
	})
}

// ("The MCP process view ... always under run".) The
// view follows OpenCode one wrapper deep (the npm package's node script
// around the native binary). `run -- opencode` where that opencode is the
// user's wrapper script in ~/bin (set a variable, then call the npm
// `opencode`; run takes it for OpenCode by its name), or `run -- npx
// opencode --port N`, puts OpenCode two levels below run's child: the
// view must see its MCP children there (else no dead-child detection at
// all).
func TestRunThroughAScriptSeesOpenCodesChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		writeProcTree(t, root, []fakeProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2000, PPID: 1, UID: uid, Start: 100, Argv: []string{"/bin/sh", "/home/ana/bin/opencode"}, Cwd: "/p"}, // run's child
			{PID: 2001, PPID: 2000, UID: uid, Start: 101, Argv: []string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, Cwd: "/p"},
			{PID: 2002, PPID: 2001, UID: uid, Start: 102, Argv: []string{"/usr/lib/node_modules/opencode-ai/node_modules/opencode-linux-x64/bin/opencode"}, Cwd: "/p"},
			{PID: 2003, PPID: 2002, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		})
		tab := procFS(t, root)
		r := newWatchRig()
		r.runEngine(t, &connectedOC{cmd: srv}, "/p")
		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		defer r.stop()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		info := p.info()
		if info == nil {
			t.Fatal("no process info")
		}
		if info.Children != 1 {
			t.Errorf("the view sees %d MCP children of the OpenCode run started, want 1 (pid 2003)", info.Children)
		}
	})
}
