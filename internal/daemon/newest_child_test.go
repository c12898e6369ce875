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
		writeProcTree(t, root, []fakeProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2000, PPID: 1, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"}, // leaked duplicate
			{PID: 2101, PPID: 2000, UID: uid, Start: 300, Argv: srv, Cwd: "/p"}, // the one serving
		})
		tab, err := procview.ProcFS(root)
		if err != nil {
			t.Fatal(err)
		}
		oc := &connectedOC{cmd: srv}
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
		p.table = tab
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.watch(ctx, tab, 2000) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Duplicates) != 1 {
			t.Fatalf("setup: the duplicate is not shown: %+v", info)
		}
		// The serving child, the newest, crashes; the leaked one lives on.
		if err := os.RemoveAll(filepath.Join(root, "2101")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "2000", "task", "2000", "children"), []byte("2100 "), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		oc.mu.Lock()
		n := oc.connects
		oc.mu.Unlock()
		if n == 0 {
			t.Errorf("the newest child (2101), the one OpenCode talks to, exited 30 s ago while OpenCode says connected: no connect, because an older leaked duplicate (2100) still runs")
		}
	})
}
