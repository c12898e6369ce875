package daemon

import (
	"context"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
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
