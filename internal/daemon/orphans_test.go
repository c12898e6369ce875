package daemon

import (
	"log/slog"
	"os"
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
// cmdline, cwd, each process's children list), as procview's tests do,
// each process in its parent's pid's group.
func writeProcTree(t *testing.T, root string, procs []fakeProc) {
	t.Helper()
	grouped := make([]groupedProc, len(procs))
	for i, p := range procs {
		grouped[i] = groupedProc{PID: p.PID, PPID: p.PPID, PGID: p.PPID, UID: p.UID, Start: p.Start, Argv: p.Argv, Cwd: p.Cwd}
	}
	writeGroupedTree(t, root, grouped)
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
	p := &procWatch{log: slog.New(slog.DiscardHandler), table: tab, root: 2000, launchers: map[procview.Key]procview.Launcher{},
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
