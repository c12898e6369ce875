package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// fakeProc is one process of a /proc tree written by writeProcTree.
type fakeProc struct {
	PID, PPID, UID int
	Start          uint64
	Argv           []string
	Cwd            string
}

// writeProcTree writes procs as a /proc tree under root (stat, status,
// cmdline, cwd, each process's children list), as procview's tests do.
func writeProcTree(t *testing.T, root string, procs []fakeProc) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(root, 0o755))
	must(os.WriteFile(filepath.Join(root, "stat"), []byte("cpu  1 0 1 1 0 0 0 0 0 0\nbtime 1796110733\nprocesses 1\n"), 0o644))
	kids := map[int][]int{}
	for _, p := range procs {
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.PID))
		must(os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(p.PID)), 0o755))
		comm := filepath.Base(p.Argv[0])
		stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194304 639 0 0 0 0 0 0 0 20 0 1 0 %d 1828069376 2486\n", p.PID, comm, p.PPID, p.PPID, p.PPID, p.Start)
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

// (Orphans are processes whose "OpenCode is gone or is another
// process than the one that started them"). Two TUIs of one user, each
// through `run` (the alias), share the global config's MCP server. Each
// daemon watches its own OpenCode, and its status lists the other TUI's
// live, healthy server as an orphan, with "Fix: mcp-reconnect doctor
// --reap"; doctor itself counts every live OpenCode of the user as
// watched and (rightly) lists nothing. Status tells the user to reap a
// process that is no orphan.
func TestStatusDoesNotListAnotherTUIsLiveServer(t *testing.T) {
	uid := os.Getuid()
	root := t.TempDir()
	srv := []string{"npx", "-y", "@modelcontextprotocol/server-memory"}
	writeProcTree(t, root, []fakeProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
		{PID: 1000, PPID: 1, UID: uid, Start: 10, Argv: []string{"-bash"}, Cwd: "/home/ana"},
		// TUI one, watched by this daemon, in /home/ana/a.
		{PID: 2000, PPID: 1000, UID: uid, Start: 100, Argv: []string{"/home/ana/.opencode/bin/opencode", "--port", "41000"}, Cwd: "/home/ana/a"},
		{PID: 2001, PPID: 2000, UID: uid, Start: 101, Argv: srv, Cwd: "/home/ana/a"},
		// TUI two, another run's, in /home/ana/b: the same global server.
		{PID: 3000, PPID: 1000, UID: uid, Start: 200, Argv: []string{"/home/ana/.opencode/bin/opencode", "--port", "41001"}, Cwd: "/home/ana/b"},
		{PID: 3001, PPID: 3000, UID: uid, Start: 201, Argv: srv, Cwd: "/home/ana/b"},
	})
	tab, err := procview.ProcFS(root)
	if err != nil {
		t.Fatal(err)
	}
	p := &procWatch{log: slog.New(slog.DiscardHandler), table: tab, root: 2000,
		last:    procview.Snapshot{At: time.Now()},
		servers: []procview.LocalServer{{Directory: "/home/ana/a", Name: "memory", Command: srv}}}
	info := p.info()
	if info == nil {
		t.Fatal("no process info")
	}
	for _, o := range info.Orphans {
		if o.PID == 3001 {
			t.Errorf("status lists pid 3001, the live server of another running OpenCode (pid 3000), as an orphan (%s); fix shown: %q", o.Why, info.Fix)
		}
	}
}
