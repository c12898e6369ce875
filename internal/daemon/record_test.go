package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// groupedProc is one process of a /proc tree, with its own process group.
type groupedProc struct {
	PID, PPID, PGID, UID int
	Start                uint64
	Argv                 []string
	Cwd                  string
}

// writeGroupedTree writes procs under root as writeProcTree does, but with each
// process's own group (writeProcTree puts every process in its parent's
// pid's group).
func writeGroupedTree(t *testing.T, root string, procs []groupedProc) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(root, 0o755))
	must(os.WriteFile(filepath.Join(root, "stat"), []byte("cpu  1 0 1 1 0 0 0 0 0 0\nbtime 1796110733\nprocesses 1\n"), 0o644))
	must(os.MkdirAll(filepath.Join(root, "sys", "kernel", "random"), 0o755))
	must(os.WriteFile(filepath.Join(root, "sys", "kernel", "random", "boot_id"), []byte("5d2f0b7e-3c1a-4e8b-9f6d-0a1b2c3d4e5f\n"), 0o644))
	kids := map[int][]int{}
	for _, p := range procs {
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.PID))
		_ = os.RemoveAll(dir)
		must(os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(p.PID)), 0o755))
		comm := filepath.Base(p.Argv[0])
		stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194304 639 0 0 0 0 0 0 0 20 0 1 0 %d 1828069376 2486\n", p.PID, comm, p.PPID, p.PGID, p.PGID, p.Start)
		must(os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
		status := fmt.Sprintf("Name:\t%s\nState:\tS\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", comm, p.PID, p.PID, p.PPID, p.UID, p.UID, p.UID, p.UID)
		must(os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
		must(os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(p.Argv, "\x00")+"\x00"), 0o644))
		must(os.Symlink(p.Cwd, filepath.Join(dir, "cwd")))
		var list []byte
		for _, c := range kids[p.PID] {
			list = append(strconv.AppendInt(list, int64(c), 10), ' ')
		}
		must(os.WriteFile(filepath.Join(dir, "task", strconv.Itoa(p.PID), "children"), list, 0o644))
	}
}

// writeClock gives the fake /proc tree at root a boot clock (uptime,
// seconds with two decimals, as the kernel writes it) and a boot id.
func writeClock(t *testing.T, root, uptime, bootID string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, "uptime"), []byte(uptime+" 0.00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "sys", "kernel", "random")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boot_id"), []byte(bootID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The record is "what proves, after
// OpenCode is gone, that a process was its MCP server", and the daemon
// writes it once more when it sees its OpenCode exit ("what proves its
// orphans"). But the scan that sees OpenCode gone knows nothing else
// (Snapshot.Gone: no Servers, no Others), and Record.Save replaces the
// file: the last word the daemon writes about a dead OpenCode is that it
// had no MCP processes. Every sighting is erased at the very moment it
// becomes the evidence. Where OpenCode does not lead its process group
// (started by a script or a shell without job control) and puts no
// OPENCODE_PID in the environment (1.1.65, the v2 line), the record is
// the only proof there is: doctor --reap then finds the left-over server
// "not proven" and never ends it.
func TestRecordKeepsTheSightingsOfAnOpenCodeThatDied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		procs := []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			// a script that started OpenCode: it leads the group.
			{PID: 1000, PPID: 1, PGID: 1000, UID: uid, Start: 10, Argv: []string{"/bin/sh", "/home/ana/bin/serve"}, Cwd: "/p"},
			{PID: 2000, PPID: 1000, PGID: 1000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 2000, PGID: 1000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		}
		writeGroupedTree(t, root, procs)
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
		seen := func() []int { return recordedPIDs(t, &rec) }
		if got := seen(); len(got) != 1 || got[0] != 2100 {
			t.Fatalf("setup: while OpenCode runs the record holds %v, want [2100]", got)
		}

		// OpenCode is SIGKILLed: its server is adopted by init and stays
		// in the script's group.
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.RemoveAll(filepath.Join(root, "2000")))
		writeGroupedTree(t, root, []groupedProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 1000, PPID: 1, PGID: 1000, UID: uid, Start: 10, Argv: []string{"/bin/sh", "/home/ana/bin/serve"}, Cwd: "/p"},
			{PID: 2100, PPID: 1, PGID: 1000, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		})
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the watch did not see OpenCode exit")
		}
		if got := seen(); len(got) != 1 || got[0] != 2100 {
			t.Errorf("after OpenCode died the record holds %v, want [2100]: the daemon erased the sighting that proves the orphan", got)
		}
		all, _ := rec.Load()
		found, err := procview.Orphans(tab, []procview.LocalServer{{Directory: "/p", Name: "s", Command: srv}}, procview.Scope{UID: uid, Record: all})
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || !found[0].Evidence.Proven() {
			for _, o := range found {
				t.Errorf("orphan %d: %v (%s)", o.PID, o.Evidence, o.Why)
			}
			t.Errorf("doctor --reap cannot prove the server OpenCode left behind: %d orphans listed", len(found))
		}
	})
}
