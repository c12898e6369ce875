package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// The record is rewritten only when a
// scan reports a server child started or exited (dirty), and neither is
// reported for a child that was known before: a child first seen
// as one of OpenCode's Others (the scan ran before the engine had read
// that directory's config, which is the very call that makes OpenCode
// spawn it; or its directory is not armed yet) and then assigned to its
// server once the config is known is never written down, nor is any
// Other child started after the first save. The record ("every MCP
// process seen under a live OpenCode goes into the record") then lacks
// exactly the servers OpenCode started after the daemon began watching,
// and doctor --reap cannot prove them once OpenCode is gone.
func TestRecordHoldsAChildSeenBeforeItsConfigWasRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		base := []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 1000, PPID: 1, PGID: 1000, UID: uid, Start: 10, Argv: []string{"/bin/sh", "/home/ana/bin/serve"}, Cwd: "/p"},
			{PID: 2000, PPID: 1000, PGID: 1000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
		}
		writeGroupedTree(t, root, base)
		tab := procFS(t, root)
		r := newWatchRig()
		eng := r.runEngine(t, &connectedOC{cmd: srv}, "")
		rec := procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
		p := r.newWatch(t, 2000)
		p.record = &rec
		r.goWatch(p, tab, 2000)
		defer r.stop()
		time.Sleep(5 * time.Second) // watching; the first record written
		synctest.Wait()

		// A client opens /p: OpenCode spawns its server while the
		// config is being read; a scan sees the child first.
		writeGroupedTree(t, root, append(base, groupedProc{PID: 2100, PPID: 2000, PGID: 1000, UID: uid, Start: 600, Argv: srv, Cwd: "/p"}))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		_ = eng.Arm("/p", reconnect.ArmedByFlag)
		time.Sleep(30 * time.Second) // config read, the child assigned to its server
		synctest.Wait()
		if info := p.info(); info == nil || info.Children != 1 {
			t.Fatalf("setup: the view does not see pid 2100 serve /p's server: %+v", info)
		}
		seen := recordedPIDs(t, &rec)
		if len(seen) != 1 || seen[0] != 2100 {
			t.Errorf("the record holds %v while OpenCode runs pid 2100 for /p's server, want [2100]: the child was never written down", seen)
		}
	})
}
