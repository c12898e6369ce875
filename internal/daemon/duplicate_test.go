package daemon

import (
	"context"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// otherDaemon registers a live process (a sleep standing in for another
// daemon) in reg as watching urls and following service.
func otherDaemon(t *testing.T, reg *registry.Registry, service string, urls ...string) registry.Entry {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e := registry.Entry{PID: cmd.Process.Pid, URLs: urls, Service: service, StatusAddr: "127.0.0.1:4197", Token: "t", Started: time.Now()}
	remove, err := reg.Register(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return e
}

// refusedRun runs a daemon that should refuse to start, bounded so that
// one that does start fails the test instead of hanging it.
func refusedRun(cfg Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Run(ctx, cfg, slog.New(slog.DiscardHandler))
}

// A second daemon for an OpenCode server that a running daemon already
// watches (its URL spelt another way) refuses to start, naming the
// running one, before it makes any request to OpenCode; with
// AllowDuplicate it runs.
func TestSecondDaemonForOneServerIsRefused(t *testing.T) {
	fake := fakeopencode.New(nil)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	first := otherDaemon(t, reg, "", "http://127.0.0.1:9", strings.Replace(hs.URL, "http://", "HTTP://", 1)+"/")

	cfg := Config{Servers: []Target{{URL: hs.URL}}, StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig()}
	err := refusedRun(cfg)
	var dup *DuplicateError
	if !errors.As(err, &dup) || dup.Running.PID != first.PID {
		t.Fatalf("Run = %v, want a *DuplicateError naming pid %d", err, first.PID)
	}
	for _, want := range []string{"pid " + strconv.Itoa(first.PID), "status api 127.0.0.1:4197", hs.URL, "--allow-duplicate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the refused daemon made %d requests to OpenCode", n)
	}
	// Without a status API (so never registered) it is refused all the same.
	cfg.StatusAddr = ""
	if err := refusedRun(cfg); !errors.As(err, &dup) {
		t.Fatalf("Run without a status API = %v", err)
	}

	cfg.StatusAddr, cfg.AllowDuplicate = "127.0.0.1:0", true
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	cfg.Ready = func(a string) { ready <- a }
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run with AllowDuplicate = %v", err)
	}
	all, _ := reg.List()
	if got := slices.DeleteFunc(all, func(e registry.Entry) bool { return !e.Watches(hs.URL) }); len(got) != 2 {
		t.Errorf("registered daemons for %s: %+v, want both", hs.URL, got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A daemon that follows the OpenCode 2 service file watches the service,
// wherever the file says it is now: a second daemon for the same file is
// refused, and so is one for the URL the file names. `run` does not start
// a daemon for a service that a daemon watches by URL.
func TestDaemonFollowingTheServiceFileWatchesTheService(t *testing.T) {
	dir := t.TempDir()
	reg := &registry.Registry{Dir: filepath.Join(dir, "daemons")}
	file := filepath.Join(dir, "service.json")
	if err := os.WriteFile(file, []byte(`{"id":"x","version":"2.0.21","url":"http://127.0.0.1:49374","pid":1,"password":"pw"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	first := otherDaemon(t, reg, file, "http://127.0.0.1:50000") // registered before the service moved
	cfg := Config{Servers: []Target{{URL: "http://127.0.0.1:49374", ServiceFile: filepath.Join(dir, ".", "service.json")}},
		Registry: reg, Engine: reconnect.DefaultConfig}
	var dup *DuplicateError
	if err := refusedRun(cfg); !errors.As(err, &dup) || dup.Running.PID != first.PID || !strings.Contains(err.Error(), "OpenCode 2 service") {
		t.Fatalf("Run for the same service file = %v", err)
	}

	reg2 := &registry.Registry{Dir: filepath.Join(dir, "daemons2")}
	byURL := otherDaemon(t, reg2, "", "http://127.0.0.1:49374")
	cfg.Registry = reg2
	if err := refusedRun(cfg); !errors.As(err, &dup) || dup.Running.PID != byURL.PID {
		t.Fatalf("Run for the service a daemon watches by URL = %v", err)
	}
	if _, _, ok, err := ServiceDaemon(reg2, file); !ok || err != nil {
		t.Fatalf("ServiceDaemon = %v, %v: a daemon watching the service's URL does not count", ok, err)
	}
}

// The check and the registration are one step under the registry's lock:
// of two daemons started at once for one server, the second sees the
// first. While registerUnique is between its check and its write, nobody
// else can take the lock.
func TestDuplicateCheckAndRegistrationAreAtomic(t *testing.T) {
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	held := false
	testHookChecked = func() {
		f, err := os.OpenFile(filepath.Join(reg.Dir, ".register.lock"), os.O_RDWR, 0)
		if err != nil {
			t.Errorf("lock file: %v", err)
			return
		}
		defer f.Close()
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		held = errors.Is(err, syscall.EWOULDBLOCK)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
	}
	defer func() { testHookChecked = nil }()
	e := registry.Entry{PID: os.Getpid(), URLs: []string{"http://127.0.0.1:4096"}, StatusAddr: "127.0.0.1:1", Token: "t"}
	remove, err := registerUnique(reg, e, false)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if !held {
		t.Fatal("the registry lock was free between the duplicate check and the write")
	}

	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	second := registry.Entry{PID: cmd.Process.Pid, URLs: []string{"http://localhost:4096/"}, StatusAddr: "127.0.0.1:2", Token: "u"}
	var dup *DuplicateError
	if _, err := registerUnique(reg, second, false); !errors.As(err, &dup) || dup.Running.PID != os.Getpid() {
		t.Fatalf("second registration = %v", err)
	}
}

// connectedOC is an OpenCode whose one local server stays connected; it
// counts connects.
type connectedOC struct {
	mu       sync.Mutex
	connects int
	cmd      []string
}

func (o *connectedOC) MCPStatus(context.Context, string) (map[string]opencode.MCPServerStatus, error) {
	return map[string]opencode.MCPServerStatus{"s": {Status: opencode.StatusConnected}}, nil
}

func (o *connectedOC) Connect(context.Context, string, string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.connects++
	return nil
}

func (o *connectedOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	return map[string]opencode.MCPEntry{"s": {Type: "local", Command: o.cmd}}, nil
}

// (A dead child is a crash; rule 7.) Status and
// doctor show a duplicate with its fix: "end the older with kill PID".
// The user does so. The view reports that older child Exited, the daemon
// tells the engine ChildExited, and the engine reconnects the server
// although its newest child still runs and serves it: the healthy child
// is replaced (its in-flight tool calls cut) for following our own advice.
// Any exit of a non-serving duplicate does the same.
func TestKillingTheOlderDuplicateReconnectsNothing(t *testing.T) {
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
		// kill 2100, as status advises.
		removeProcs(t, root, 2100)
		setChildren(t, root, 2000, "2101 ")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		n := oc.connectCount()
		if n != 0 {
			t.Fatalf("%d connects of a server whose serving child (2101) still runs, after its older duplicate was ended", n)
		}
	})
}

// respawningOC is OpenCode 1.18.34 with one stdio server, over a /proc
// tree: a connect takes 0.4 s and replaces the server's child with a new
// one (the old one exits, as the facts say for a connect on a connected
// server); a crash ends the child and makes the server failed.
type respawningOC struct {
	t    *testing.T
	root string
	uid  int
	cmd  []string

	mu       sync.Mutex
	status   string
	child    int
	next     int // the pid of the next child
	connects []time.Time
}

func (o *respawningOC) setChild(pid int) {
	if o.child != 0 {
		_ = os.RemoveAll(filepath.Join(o.root, strconv.Itoa(o.child)))
	}
	o.child = pid
	list := ""
	if pid != 0 {
		writeProcTree(o.t, o.root+".new", []fakeProc{{PID: pid, PPID: 2000, UID: o.uid, Start: uint64(pid), Argv: o.cmd, Cwd: "/p"}})
		if err := os.Rename(filepath.Join(o.root+".new", strconv.Itoa(pid)), filepath.Join(o.root, strconv.Itoa(pid))); err != nil {
			o.t.Error(err)
		}
		list = strconv.Itoa(pid) + " "
	}
	if err := os.WriteFile(filepath.Join(o.root, "2000", "task", "2000", "children"), []byte(list), 0o644); err != nil {
		o.t.Error(err)
	}
}

func (o *respawningOC) MCPStatus(context.Context, string) (map[string]opencode.MCPServerStatus, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return map[string]opencode.MCPServerStatus{"s": {Status: o.status}}, nil
}

func (o *respawningOC) Connect(ctx context.Context, _, _ string) error {
	o.mu.Lock()
	o.connects = append(o.connects, time.Now())
	o.mu.Unlock()
	time.Sleep(400 * time.Millisecond)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	o.setChild(o.next) // a new process; the old one, if any, exits
	o.status = opencode.StatusConnected
	return nil
}

func (o *respawningOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	return map[string]opencode.MCPEntry{"s": {Type: "local", Command: o.cmd}}, nil
}

// (A dead child is a crash; rule 4: crash loops back
// off, a healthy server is left alone). One crash of a stdio server on
// 1.18.34, daemon and process view wired as in production: OpenCode says
// failed and publishes mcp.tools.changed, the engine reconnects at once.
// The view sees the crashed child gone at its next scan, after that
// connect, and the engine connects the healthy server again; that connect
// replaces the new child, whose exit the view reports in turn, and so on:
// a healthy server restarted again and again (1, 2, 4, 8, 16 s, then every
// slow interval) for one crash.
func TestOneCrashIsRepairedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir() + "/proc"
		oc := &respawningOC{t: t, root: root, uid: os.Getuid(), cmd: []string{"node", "srv.js"}, status: opencode.StatusConnected}
		writeProcTree(t, root, underOpenCode(oc.uid))
		oc.next = 2100
		oc.setChild(2100)
		tab := procFS(t, root)
		r := newWatchRig()
		eng := r.runEngine(t, oc, "/p")
		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		defer r.stop()
		time.Sleep(90*time.Second + 700*time.Millisecond) // stable; mid-way between two scans
		synctest.Wait()

		crash := time.Now()
		oc.mu.Lock()
		oc.setChild(0)
		oc.status = opencode.StatusFailed
		oc.mu.Unlock()
		eng.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"})
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		oc.mu.Lock()
		defer oc.mu.Unlock()
		if len(oc.connects) != 1 {
			var at []time.Duration
			for _, c := range oc.connects {
				at = append(at, c.Sub(crash).Round(100*time.Millisecond))
			}
			t.Fatalf("one crash, %d connects (at %v after it), each replacing a working child", len(oc.connects), at)
		}
	})
}
