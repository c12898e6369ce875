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
		oc0 := fakeProc{PID: 2000, PPID: 1, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"}
		writeProcTree(t, root, []fakeProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			oc0,
			{PID: 2100, PPID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"}, // leaked duplicates
			{PID: 2101, PPID: 2000, UID: uid, Start: 300, Argv: srv, Cwd: "/p"},
			{PID: 2102, PPID: 2000, UID: uid, Start: 400, Argv: srv, Cwd: "/p"}, // the one serving
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
			t.Fatalf("setup: the duplicates are not shown: %+v", info)
		}
		children := func(pids string) {
			t.Helper()
			if err := os.WriteFile(filepath.Join(root, "2000", "task", "2000", "children"), []byte(pids), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The newest child crashes (its exit is seen at once, as an exit
		// watcher sees it).
		if err := os.RemoveAll(filepath.Join(root, "2102")); err != nil {
			t.Fatal(err)
		}
		children("2100 2101 ")
		p.Look()
		time.Sleep(250 * time.Millisecond)
		synctest.Wait()
		// A moment later, within the 0.5 s grace, the oldest duplicate
		// ends too.
		if err := os.RemoveAll(filepath.Join(root, "2100")); err != nil {
			t.Fatal(err)
		}
		children("2101 ")
		p.Look()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		oc.mu.Lock()
		n := oc.connects
		oc.mu.Unlock()
		if n == 0 {
			t.Errorf("the newest child (2102), the one OpenCode talks to, crashed 30 s ago while OpenCode says connected: no connect, because the exit of the oldest duplicate (2100) after it made the older duplicate 2101 pass for its successor")
		}
	})
}
