package e2e

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// The user's real outcome: a running session calls an MCP server's tool
// through a real prompt; the server goes away behind OpenCode's back;
// with mcp-reconnect watching, the same session's next call succeeds and
// is served by the server's new process. What OpenCode alone does is
// recorded in the same test: that call fails. Run once per way the
// generation offers tools to the model (gen.ToolModes: by name, and on
// 2.x through Code Mode's execute tool, its default).

// A stdio server that crashes.
func TestToolCallAfterStdioCrash(t *testing.T) {
	toolCallAfterRepair(t, func(t *testing.T, p *Project) (map[string]any, func()) {
		return p.StdioServer("s"), func() {
			pids := p.Starts(t, "s")
			killPID(t, pids[len(pids)-1])
		}
	})
}

// A remote server that restarts (-strict-sessions: like the TypeScript
// SDK's servers, the restarted process answers OpenCode's old session id
// with 400, from which OpenCode does not recover by itself; a 404 it
// would).
func TestToolCallAfterRemoteRestart(t *testing.T) {
	toolCallAfterRepair(t, func(t *testing.T, p *Project) (map[string]any, func()) {
		remote := newHTTPServer(t, p.ServerLog("s"), "-strict-sessions")
		remote.Start(t)
		return RemoteServer(remote.URL), func() {
			remote.Stop()
			time.Sleep(300 * time.Millisecond)
			remote.Start(t)
		}
	})
}

// toolCallAfterRepair runs the scenario for the server "s" that server
// configures (and starts) in p; its fail makes s go away behind
// OpenCode's back.
func toolCallAfterRepair(t *testing.T, server func(t *testing.T, p *Project) (config map[string]any, fail func())) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		for _, mode := range g.ToolModes {
			t.Run(mode.Name, func(t *testing.T) {
				m := newFakeModel(t, "s")
				oc := g.start(t, ochost.Options{Env: m.Env(g)})
				p := g.newProject(t, nil)
				cfg, fail := server(t, p)
				maps.Copy(cfg, mode.Server)
				rewriteProject(t, p, map[string]any{"s": cfg})
				oc.Status(t, p.Dir)
				oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)
				time.Sleep(userPause)
				c := newChat(t, oc, p.Dir)
				if err := c.Echo(t, p, m, "one"); err != "" {
					t.Fatalf("before any failure: %s", err)
				}

				// OpenCode alone: the session's call fails.
				fail()
				time.Sleep(userPause)
				err := c.Echo(t, p, m, "two")
				t.Logf("OpenCode alone, after the failure: %s", err)
				if err == "" {
					t.Fatal("OpenCode alone served the call after the failure: the premise of this test changed; re-check the facts")
				}

				// With mcp-reconnect watching, the same failure is repaired
				// and the running session's next call works.
				w := startWatch(t, oc, oc.Password, "--directory", p.Dir)
				w.WaitLog(t, "watching opencode", 15*time.Second)
				oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)
				// The daemon watches a remote endpoint from its first read
				// that says connected: a restart before that is one it
				// cannot see.
				waitFor(t, 30*time.Second, "the daemon to read s connected", func() bool {
					s := serverState(t, w, p.Dir, "s")
					return s != nil && s["status"] == "connected"
				})
				time.Sleep(time.Second) // its watch holds a connection to the endpoint
				defer func() {
					if t.Failed() {
						t.Logf("the daemon's status: %s", mustJSON(t, w.StatusJSON(t)))
					}
				}()
				before := strings.Count(w.Log.String(), "reconnected MCP server")
				fail()
				failed := time.Now()
				// What a user waits for: the daemon's announcement that it
				// brought the server back (its log line; a toast in a 1.x
				// TUI), then the time it takes to type a prompt (userPause:
				// 2.1.2 offers the tools a moment after it says connected).
				waitFor(t, 30*time.Second, "the daemon to announce the repair", func() bool {
					return strings.Count(w.Log.String(), "reconnected MCP server") > before
				})
				t.Logf("repair announced %v after the failure", time.Since(failed).Round(10*time.Millisecond))
				oc.WaitStatus(t, p.Dir, "s", "connected", 10*time.Second)
				time.Sleep(userPause)
				if err := c.Echo(t, p, m, "three"); err != "" {
					t.Fatalf("with mcp-reconnect, after the repair: %s", err)
				}
			})
		}
	})
}
