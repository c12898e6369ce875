package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
)

// The process view on the real OpenCode: each local server is a direct
// child running exactly the configured command in the directory (or the
// configured cwd), or a launcher (npx, a shell, a wrapper script) whose
// server the view finds below it; a killed child is reported as exited
// while OpenCode reaps it at once, a connect is a new child, and
// OpenCode's own exit ends the view. The figures it logs are those in
// procview's package doc.
func TestProcessViewOnRealOpenCode(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		p := g.newProject(t, nil)
		if err := os.MkdirAll(filepath.Join(p.Dir, "sub dir"), 0o700); err != nil {
			t.Fatal(err)
		}
		inSub := p.StdioServer("in sub")
		inSub["cwd"] = "sub dir"
		viaSh := []string{"sh", "-c", mcpServerBin + " -transport stdio -name 'via sh' -log " + shellquote.Quote(p.ServerLog("via sh")) + "; true"}
		// A wrapper script of the user's, run through its #! line: the
		// shell stays OpenCode's child, the server runs below it.
		wrapper := filepath.Join(filepath.Dir(p.Dir), "start-server.sh")
		script := "#!/bin/sh\n# a wrapper of the user's\nexport MCP_WRAPPED=1\n" + shellquote.Quote(mcpServerBin) + " -transport stdio -name 'via script' -log " + shellquote.Quote(p.ServerLog("via script")) + "\n"
		if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
		mcp := map[string]any{
			"plain":      p.StdioServer("plain"),
			"in sub":     inSub,
			"via sh":     map[string]any{"type": "local", "command": viaSh},
			"via script": map[string]any{"type": "local", "command": []string{wrapper}},
			"via npx":    p.NpxServer(t, "via npx"),
		}
		p = rewriteProject(t, p, mcp)
		for name := range mcp {
			oc.WaitStatus(t, p.Dir, name, "connected", 60*time.Second)
		}
		var servers []procview.LocalServer
		for name, cfg := range mcp {
			c := cfg.(map[string]any)
			s := procview.LocalServer{Directory: p.Dir, Name: name, Command: c["command"].([]string)}
			if cwd, ok := c["cwd"].(string); ok {
				s.Cwd = cwd
			}
			servers = append(servers, s)
		}
		tab, err := procview.System()
		if err != nil {
			t.Fatal(err)
		}
		v, err := procview.NewView(tab, oc.PID())
		if err != nil {
			t.Fatal(err)
		}
		v.SetServers(servers)
		first, err := v.Scan()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			cs := first.Servers[s.Key()]
			if len(cs) != 1 || cs[0].Parent != oc.PID() {
				t.Fatalf("%s served by %+v, want one direct child of OpenCode %d; others %+v", s.Name, cs, oc.PID(), first.Others)
			}
			// The server the child runs: the child itself, or what its
			// launcher started below it (a script's or a shell's server;
			// npm's shell and then node on the package's bin, which here
			// runs test/mcpserver as its own child), is the process
			// that says it started, or the package's node above it.
			srv, _, err := procview.ServerProcess(tab, procview.Process{PID: cs[0].PID, Birth: cs[0].Birth})
			starts := p.Starts(t, s.Name)
			if err != nil || len(starts) != 1 {
				t.Fatalf("%s: no server found below child %d (%s): %v; started %v", s.Name, cs[0].PID, cs[0].Command(), err, starts)
			}
			if ppid, _ := parentOf(starts[0]); srv.PID != starts[0] && (ppid != srv.PID || srv.Comm != "node") {
				t.Fatalf("%s: the view finds server %d (%s) below child %d (%s), want %d, the one started, or its package's node", s.Name, srv.PID, procview.Display(srv.Argv), cs[0].PID, cs[0].Command(), starts[0])
			}
			t.Logf("%s: pid %d cwd %q command %s; launcher %q, server pid %d", s.Name, cs[0].PID, cs[0].Cwd, cs[0].Command(), procview.LauncherOf(s.Command).Name, srv.PID)
		}

		// A killed child: how long OpenCode leaves it a zombie, and the exit.
		plain, _ := first.Child(procview.Key{Directory: p.Dir, Name: "plain"})
		killed := time.Now()
		killPID(t, plain.PID)
		zombie := false
		for time.Since(killed) < 5*time.Second {
			st, err := tab.Stat(plain.PID)
			if errors.Is(err, procview.ErrGone) || (err == nil && st.Birth != plain.Birth) {
				break
			}
			zombie = zombie || (err == nil && st.Zombie)
			time.Sleep(time.Millisecond)
		}
		t.Logf("killed child reaped by OpenCode after %v (seen as a zombie: %v)", time.Since(killed).Round(time.Millisecond), zombie)
		second, err := v.Scan()
		if err != nil {
			t.Fatal(err)
		}
		// The one change: plain's child is gone.
		want := serving(first)
		delete(want, "plain")
		if got := serving(second); !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("after the kill: %v, want %v", got, want)
		}
		oc.WaitStatus(t, p.Dir, "plain", "failed", 5*time.Second)

		// Connect starts a new child; connect on a connected server replaces it.
		for _, name := range []string{"plain", "in sub"} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			code, body, err := oc.Do(ctx, "POST", fmt.Sprintf(g.Connect, url.PathEscape(name)), p.Dir)
			cancel()
			if err != nil || code != g.ConnectOK {
				t.Fatalf("connect %s: %d %s %v", name, code, body, err)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		// The changes: plain has a child again, in sub's child was
		// replaced by another; every other child is the same.
		replaced := func(s procview.Snapshot) bool {
			got, want := serving(s), serving(second)
			p, sub := got["plain"], got["in sub"]
			delete(got, "plain")
			delete(got, "in sub")
			delete(want, "in sub")
			return len(p) == 1 && len(sub) == 1 && !slices.Equal(sub, serving(second)["in sub"]) && maps.EqualFunc(got, want, slices.Equal)
		}
		var third procview.Snapshot
		for time.Now().Before(deadline) {
			third, err = v.Scan()
			if err != nil {
				t.Fatal(err)
			}
			if replaced(third) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !replaced(third) {
			t.Fatalf("after the connects: %v, before %v", serving(third), serving(second))
		}

		// OpenCode killed: the view sees it gone; its children get EOF on stdin.
		if err := syscall.Kill(oc.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		deadline = time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			s, err := v.Scan()
			if err == nil && s.Gone {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("OpenCode's exit was not seen within 5 s")
	})
}

// serving is the pids of the children serving each server, by name
// (the birth told apart from a reused pid by the view itself).
func serving(s procview.Snapshot) map[string][]int {
	out := map[string][]int{}
	for k, cs := range s.Servers {
		for _, c := range cs {
			out[k.Name] = append(out[k.Name], c.PID)
		}
	}
	return out
}
