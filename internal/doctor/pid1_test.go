package doctor

import (
	"bytes"
	"context"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// (Orphans and duplicates: reap "only processes of
// this user whose parentage proves they are orphans"). In a container
// (docker run … opencode serve, a devcontainer whose entrypoint is the
// TUI) OpenCode is pid 1, so every live MCP server it runs has parent 1.
// Doctor skips pid 1 when it looks for live OpenCodes, and procview counts
// any parent 1 as "reparented to init", a proof: the live servers of the
// running OpenCode are listed as proven orphans, and doctor --reap --yes
// ends them all.
func TestLiveChildrenOfOpenCodeAsPID1AreNotOrphans(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, []fakeProc{
		{PID: 1, UID: ana, Start: 1, Argv: []string{"/usr/local/bin/opencode", "serve", "--port", "4096"}, Cwd: proj},
		{PID: 20, PPID: 1, UID: ana, Start: 100, Argv: srvA, Cwd: proj},
		{PID: 21, PPID: 1, UID: ana, Start: 101, Argv: srvB, Cwd: proj, Comm: "srvb"},
	})
	o := anaOptions(t)
	o.ProcessTable = func() (procview.Table, error) { return procview.ProcFS(root) }
	f, checks := FindProcesses(context.Background(), o)
	for _, orphan := range f.Orphans {
		if orphan.Evidence.Proven() {
			t.Errorf("pid %d, a live server of OpenCode (pid 1), listed as a proven orphan (%s)\n%s", orphan.PID, orphan.Why, describe(checks))
		}
	}
	fr := &fakeReap{}
	var report bytes.Buffer
	if err := Reap(context.Background(), f, ReapOptions{Yes: true, Report: &report, reap: fr.reap}); err != nil {
		t.Fatal(err)
	}
	if len(fr.ended) != 0 {
		t.Fatalf("doctor --reap --yes ended %v, the live MCP servers of the running OpenCode:\n%s", fr.ended, report.String())
	}
}
