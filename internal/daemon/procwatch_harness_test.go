package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

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
