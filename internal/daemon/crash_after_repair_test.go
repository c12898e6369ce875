package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

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

func (o *spawningOC) MCPStatus(context.Context, string) (map[string]opencode.ServerStatus, error) {
	return map[string]opencode.ServerStatus{"s": {Status: opencode.StatusConnected}}, nil
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
