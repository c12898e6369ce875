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
		procs := []fakeProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2000, PPID: 1, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: cmd, Cwd: "/p"},
			{PID: 2101, PPID: 2100, UID: uid, Start: 201, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
		}
		writeProcTree(t, root, procs)
		tab, err := procview.ProcFS(root)
		if err != nil {
			t.Fatal(err)
		}
		oc := &connectedOC{cmd: cmd}
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
		writeProcTree(t, root, []fakeProc{{PID: 2102, PPID: 2100, UID: uid, Start: 900, Argv: []string{"sleep", "600"}, Cwd: "/p"}})
		if err := os.WriteFile(filepath.Join(root, "2100", "task", "2100", "children"), []byte("2102 "), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Second)
		synctest.Wait()
		oc.mu.Lock()
		n := oc.connects
		oc.mu.Unlock()
		if n != 0 {
			t.Errorf("%d connects after node (pid 2101) ended below `sh -c 'node srv.js; sleep 600'`: the shell runs on and holds OpenCode's pipe, as it would after a build step", n)
		}
		if info := p.info(); info == nil || len(info.Servers) != 1 || info.Servers[0].ServerPID != 2102 {
			t.Errorf("status does not show what runs below the shell now (sleep, pid 2102): %+v", info)
		}

		// The launcher ends: that is a crash.
		for _, pid := range []string{"2100", "2102"} {
			if err := os.RemoveAll(filepath.Join(root, pid)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(root, "2000", "task", "2000", "children"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Second)
		synctest.Wait()
		oc.mu.Lock()
		n = oc.connects
		oc.mu.Unlock()
		if n == 0 {
			t.Errorf("the launcher (pid 2100) ended a minute ago while OpenCode says connected: no connect")
		}
	})
}
