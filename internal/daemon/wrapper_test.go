package daemon

import (
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// ("The MCP process view ... always under run".) The
// view follows OpenCode one wrapper deep (the npm package's node script
// around the native binary). `run -- opencode` where that opencode is the
// user's wrapper script in ~/bin (set a variable, then call the npm
// `opencode`; run takes it for OpenCode by its name), or `run -- npx
// opencode --port N`, puts OpenCode two levels below run's child: the
// view must see its MCP children there (else no dead-child detection at
// all).
func TestRunThroughAScriptSeesOpenCodesChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		uid := os.Getuid()
		srv := []string{"node", "srv.js"}
		root := t.TempDir()
		writeProcTree(t, root, []fakeProc{
			{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Cwd: "/"},
			{PID: 2000, PPID: 1, UID: uid, Start: 100, Argv: []string{"/bin/sh", "/home/ana/bin/opencode"}, Cwd: "/p"}, // run's child
			{PID: 2001, PPID: 2000, UID: uid, Start: 101, Argv: []string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, Cwd: "/p"},
			{PID: 2002, PPID: 2001, UID: uid, Start: 102, Argv: []string{"/usr/lib/node_modules/opencode-ai/node_modules/opencode-linux-x64/bin/opencode"}, Cwd: "/p"},
			{PID: 2003, PPID: 2002, UID: uid, Start: 200, Argv: srv, Cwd: "/p"},
		})
		tab := procFS(t, root)
		r := newWatchRig()
		r.runEngine(t, &connectedOC{cmd: srv}, "/p")
		p := r.newWatch(t, 2000)
		r.goWatch(p, tab, 2000)
		defer r.stop()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		info := p.info()
		if info == nil {
			t.Fatal("no process info")
		}
		if info.Children != 1 {
			t.Errorf("the view sees %d MCP children of the OpenCode run started, want 1 (pid 2003)", info.Children)
		}
	})
}
