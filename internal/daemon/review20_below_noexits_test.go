package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// (Found by the review of issue 20.) "Where no exit watcher works, scans
// find exits too, every scanEvery" (processes.go) — but only the exits
// of OpenCode's direct children: the server below a launcher that
// outlives it (`sh -c 'node srv.js; sleep 600'`: node crashes, the shell
// runs on, OpenCode 1.14 keeps saying connected) is watched by the exit
// watcher alone (procWatch.serving, filled by watchExits). Without a
// pidfd (a kernel before 5.3, the seccomp profiles of older container
// runtimes that answer EPERM: NewExits says ErrUnsupported) that crash
// is never seen, and the server is never brought back: the claim
// "a crash is the server's subtree ending or its launcher exiting,
// whichever OpenCode's pipe sees" holds only where pidfds exist.
func TestServerBelowALauncherIsWatchedWithoutAnExitWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		cmd := []string{"sh", "-c", "node srv.js; sleep 600"}
		root := t.TempDir()
		procs := []review5Proc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2000, PPID: 1, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: cmd, Cwd: "/p"},
			{PID: 2101, PPID: 2100, UID: uid, Start: 201, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
		}
		review5Tree(t, root, procs)
		tab, err := procview.ProcFS(root)
		if err != nil {
			t.Fatal(err)
		}
		oc := &review5OC{cmd: cmd}
		cfg := reconnect.DefaultConfig
		cfg.Backoff.Jitter = 0
		eng, err := reconnect.New(cfg, oc, reconnect.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = eng.Arm("/p", reconnect.ArmedByFlag)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = eng.Run(ctx) }()
		defer func() { cancel(); wg.Wait() }()
		time.Sleep(90 * time.Second) // connected, stable, its config read
		synctest.Wait()

		client, err := opencode.NewServer(opencode.ServerOptions{URL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		p := newProcWatch(eng, client, 2000, slog.New(slog.DiscardHandler))
		p.table = tab // no exit watcher (newExits nil): scans alone
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.watch(ctx, tab, 2000) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Servers) != 1 || info.Servers[0].ServerPID != 2101 {
			t.Fatalf("setup: status does not show node 2101 below the shell: %+v", info)
		}

		// node crashes; the shell goes on to `sleep 600`.
		if err := os.RemoveAll(filepath.Join(root, "2101")); err != nil {
			t.Fatal(err)
		}
		review5Tree(t, root, []review5Proc{{PID: 2102, PPID: 2100, UID: uid, Start: 900, Argv: []string{"sleep", "600"}, Cwd: "/p"}})
		if err := os.WriteFile(filepath.Join(root, "2100", "task", "2100", "children"), []byte("2102 "), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Second)
		synctest.Wait()
		oc.mu.Lock()
		n := oc.connects
		oc.mu.Unlock()
		if n == 0 {
			t.Errorf("node (pid 2101), the server below `sh -c 'node srv.js; sleep 600'`, exited a minute ago while OpenCode says connected: no connect (without an exit watcher its exit is never looked for)")
		}
	})
}
