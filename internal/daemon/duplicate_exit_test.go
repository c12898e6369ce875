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

// connectedOC is an OpenCode whose one local server stays connected; it
// counts connects.
type connectedOC struct {
	mu       sync.Mutex
	connects int
	cmd      []string
}

func (o *connectedOC) MCPStatus(context.Context, string) (map[string]opencode.ServerStatus, error) {
	return map[string]opencode.ServerStatus{"s": {Status: opencode.StatusConnected}}, nil
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
		wg.Add(1)
		go func() { defer wg.Done(); p.watch(ctx, tab, 2000) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Duplicates) != 1 {
			t.Fatalf("setup: the duplicate is not shown: %+v", info)
		}
		// kill 2100, as status advises.
		if err := os.RemoveAll(filepath.Join(root, "2100")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "2000", "task", "2000", "children"), []byte("2101 "), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		oc.mu.Lock()
		n := oc.connects
		oc.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d connects of a server whose serving child (2101) still runs, after its older duplicate was ended", n)
		}
	})
}
