package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// belowLauncherWatch watches OpenCode 2000 whose server s runs as
// `sh -c 'node srv.js; sleep 600'` (2100) with node (2101) below it.
func belowLauncherWatch(t *testing.T, root string) (p *procWatch, rec *procview.Record, done <-chan struct{}, stop func()) {
	uid := os.Getuid()
	cmd := []string{"sh", "-c", "node srv.js; sleep 600"}
	writeGroupedTree(t, root, []groupedProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
		{PID: 2000, PPID: 1, PGID: 1000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
		{PID: 2100, PPID: 2000, PGID: 1000, UID: uid, Start: 200, Argv: cmd, Cwd: "/p"},
		{PID: 2101, PPID: 2100, PGID: 1000, UID: uid, Start: 201, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
	})
	tab := procFS(t, root)
	r := newWatchRig()
	r.runEngine(t, &connectedOC{cmd: cmd}, "/p")
	rec = &procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
	p = r.newWatch(t, 2000)
	p.record = rec
	return p, rec, r.goWatch(p, tab, 2000), r.stop
}

func recordedPIDs(t *testing.T, rec *procview.Record) []int {
	t.Helper()
	all, err := rec.Load()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, s := range all {
		for _, x := range s.Seen {
			pids = append(pids, x.PID)
		}
	}
	return pids
}

// Sightings.Seen is "the children it started and the processes below
// them that serve (an npx's node, a shell's server)". The exit watcher
// never looks below a launcher, so the record must look itself: else
// only a status call would, and a daemon nobody asks for status would
// never record the server below a launcher, the process that outlives a
// launcher ended by a signal ("npm's node survives npm's SIGKILL").
func TestRecordHoldsTheServerBelowALauncherWithoutAStatusCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, rec, _, stop := belowLauncherWatch(t, t.TempDir())
		defer stop()
		time.Sleep(90 * time.Second) // config read, the child assigned, records written
		synctest.Wait()
		if got := recordedPIDs(t, rec); !slices.Contains(got, 2100) {
			t.Fatalf("setup: the record holds %v, not the launcher 2100", got)
		} else if !slices.Contains(got, 2101) {
			t.Errorf("the record holds %v: not node 2101, the server below the launcher, because no status call looked below it", got)
		}
	})
}

// The record written when OpenCode is seen gone is to keep "what
// OpenCode ran when it ends": the Gone snapshot lists no server, and
// what ran below each launcher must not be forgotten before that last
// save, or the file (replaced whole) loses the server below each
// launcher that earlier saves held.
func TestRecordWrittenAtOpenCodesEndKeepsTheServerBelowItsLauncher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		root := t.TempDir()
		p, rec, done, stop := belowLauncherWatch(t, root)
		defer stop()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		if info := p.info(); info == nil || len(info.Servers) != 1 || info.Servers[0].ServerPID != 2101 {
			t.Fatalf("setup: status does not show node 2101 below the shell: %+v", info)
		}
		// A child starts (any change): the record is written again, now
		// with what status found below the launcher.
		writeGroupedTree(t, root, []groupedProc{{PID: 2200, PPID: 2000, PGID: 1000, UID: uid, Start: 900, Argv: []string{"rg", "x"}, Cwd: "/p"}})
		if err := os.WriteFile(filepath.Join(root, "2000", "task", "2000", "children"), []byte("2100 2200 "), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := recordedPIDs(t, rec); !slices.Contains(got, 2101) {
			t.Fatalf("setup: while OpenCode runs the record holds %v, not node 2101", got)
		}

		// OpenCode is SIGKILLed; its launcher and server stay.
		for _, pid := range []string{"2000", "2200"} {
			if err := os.RemoveAll(filepath.Join(root, pid)); err != nil {
				t.Fatal(err)
			}
		}
		writeGroupedTree(t, root, []groupedProc{
			{PID: 2100, PPID: 1, PGID: 1000, UID: uid, Start: 200, Argv: []string{"sh", "-c", "node srv.js; sleep 600"}, Cwd: "/p"},
			{PID: 2101, PPID: 2100, PGID: 1000, UID: uid, Start: 201, Argv: []string{"node", "srv.js"}, Cwd: "/p"},
		})
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the watch did not see OpenCode exit")
		}
		if got := recordedPIDs(t, rec); !slices.Contains(got, 2101) {
			t.Errorf("after OpenCode ended the record holds %v: the save at its end dropped node 2101, below the launcher, which the record held a moment before", got)
		}
	})
}
