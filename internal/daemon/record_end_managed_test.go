package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// The record keeps when OpenCode ended (Sightings.End: "nothing born
// at or after it is its"), and the group evidence relies on it to
// refuse a later group that got the dead OpenCode's id. But End is
// written only by the scan that sees OpenCode gone. Under `run` the
// daemon is stopped the moment its child ends (RunManaged: <-child.Done(),
// then stop()), and nothing makes a scan happen first: the exit watcher
// watches OpenCode's children, not OpenCode, and a server OpenCode left
// behind (the orphan the record is for) does not exit. The watch returns
// on ctx.Done without a word, so in the daemon's main mode the record of
// a dead OpenCode never says when it ended, and its group proves every
// later member of a group with that id (a setsid job whose leader got
// the pid).
func TestRecordOfRunsOpenCodeSaysWhenItEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		writeGroupedTree(t, root, []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2000, PPID: 1, PGID: 2000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 2000, PGID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		})
		writeClock(t, root, "3000.00", "boot-a")
		tab := procFS(t, root)
		r := newWatchRig()
		r.runEngine(t, &connectedOC{cmd: srv}, "/p")
		rec := procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
		p := r.newWatch(t, 2000)
		p.record = &rec
		done := r.goWatch(p, tab, 2000)
		defer r.stop()

		time.Sleep(30 * time.Second)
		synctest.Wait()

		// run's child, OpenCode, is SIGKILLed; its server stays. The
		// wrapper sees its child end at once and stops the daemon.
		if err := os.RemoveAll(filepath.Join(root, "2000")); err != nil {
			t.Fatal(err)
		}
		writeGroupedTree(t, root, []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2100, PPID: 1, PGID: 2000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		})
		time.Sleep(100 * time.Millisecond) // the wrapper's wait returns
		r.cancel()
		<-done
		all, err := rec.Load()
		if err != nil || len(all) != 1 {
			t.Fatalf("record: %+v, %v", all, err)
		}
		if all[0].End != 300000 || all[0].Boot != "boot-a" {
			t.Errorf("the record of run's OpenCode, which ended before the daemon stopped, says end %d on boot %q, want the table's clock then (300000) on boot-a: its group proves any later member of a group %d", all[0].End, all[0].Boot, all[0].OpenCode.PGID)
		}
	})
}
