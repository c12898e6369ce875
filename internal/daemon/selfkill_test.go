package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

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

func (o *respawningOC) MCPStatus(context.Context, string) (map[string]opencode.ServerStatus, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return map[string]opencode.ServerStatus{"s": {Status: o.status}}, nil
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
