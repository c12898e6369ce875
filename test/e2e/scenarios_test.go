package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// lateRemote starts OpenCode with a project whose remote server "late" is
// not running, and a watcher with that directory armed.
func lateRemote(t *testing.T, g gen, flags ...string) (*OpenCode, *Project, *HTTPServer, *Watcher) {
	t.Helper()
	oc := g.startOpenCode(t, 0, "")
	p := g.newProject(t, nil)
	remote := newHTTPServer(t, p.ServerLog("late"))
	rewriteProject(t, p, map[string]any{"late": RemoteServer(remote.URL)})
	w := startWatch(t, oc, oc.Password, append([]string{"--directory", p.Dir}, flags...)...)
	w.WaitLog(t, "watching opencode", 15*time.Second)
	return oc, p, remote, w
}

// A remote server that is down when OpenCode starts (failed, never retried
// by OpenCode) is connected once it comes up.
func TestWatchConnectsLateRemoteServer(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc, p, remote, _ := lateRemote(t, g)

		if st := oc.Status(t, p.Dir); st["late"].Status != "failed" {
			t.Fatalf("with the server down: %+v, want failed", st)
		}
		time.Sleep(3 * time.Second)
		remote.Start(t)
		up := time.Now()
		oc.WaitStatus(t, p.Dir, "late", "connected", 40*time.Second)
		t.Logf("connected %v after the server came up", time.Since(up))
		if n := p.Count(t, "late", "initialize"); n < 1 {
			t.Fatalf("the server never received initialize")
		}
	})
}

// Several directories, each with its own failing servers, each recovered;
// a directory nobody used spawns no MCP process.
func TestWatchManyDirectories(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		var projects []*Project
		for range 3 {
			p := g.newProject(t, nil)
			rewriteProject(t, p, map[string]any{"a": p.StdioServer("a"), "b x": p.StdioServer("b x")})
			projects = append(projects, p)
		}
		unused := g.newProject(t, nil)
		rewriteProject(t, unused, map[string]any{"u": unused.StdioServer("u")})
		w := startWatch(t, oc, oc.Password)
		w.WaitLog(t, "watching opencode", 15*time.Second)

		for _, p := range projects {
			oc.Status(t, p.Dir) // a client uses it
		}
		for _, p := range projects {
			for _, n := range []string{"a", "b x"} {
				p.KillConnected(t, oc, n)
			}
		}
		for _, p := range projects {
			for _, n := range []string{"a", "b x"} {
				p.WaitStarts(t, n, 2, 40*time.Second)
				oc.WaitStatus(t, p.Dir, n, "connected", 40*time.Second)
				if got := len(p.Starts(t, n)); got != 2 {
					t.Errorf("%s/%s: %d processes, want 2 (one crash, one reconnect)", p.Dir, n, got)
				}
			}
		}
		time.Sleep(2 * time.Second)
		if got := len(unused.Starts(t, "u")); got != 0 {
			t.Fatalf("the unused directory spawned %d MCP processes", got)
		}
	})
}

// A disabled server is never started and a server needing auth is never
// retried, whatever else happens in its directory.
func TestWatchLeavesDisabledAndAuthAlone(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		p := g.newProject(t, nil)
		auth := newHTTPServer(t, p.ServerLog("auth"), "-require-auth")
		auth.Start(t)
		rewriteProject(t, p, map[string]any{
			"off":    p.Disabled(p.StdioServer("off")),
			"auth":   RemoteServer(auth.URL),
			"broken": map[string]any{"type": "local", "command": []string{"false"}},
		})
		w := startWatch(t, oc, oc.Password, "--directory", p.Dir, "--idle-interval", "2s")
		w.WaitLog(t, "watching opencode", 15*time.Second)

		st := oc.Status(t, p.Dir)
		if st["off"].Status != "disabled" || st["auth"].Status != "needs_auth" || st["broken"].Status != "failed" {
			t.Fatalf("initial status = %+v", st)
		}
		authRequests := p.Count(t, "auth", "request")
		// Keep the daemon busy in this directory: the broken server is retried,
		// and an explicit reconnect of everything is asked for.
		out, err := exec.Command(reconnectBin, "reconnect", "--status-addr", w.StatusAddr, "--directory", p.Dir).CombinedOutput()
		if err != nil {
			t.Fatalf("reconnect: %v %s", err, out)
		}
		out, err = exec.Command(reconnectBin, "reconnect", "--status-addr", w.StatusAddr, "--directory", p.Dir, "off", "auth").CombinedOutput()
		if err != nil {
			t.Fatalf("reconnect off auth: %v %s", err, out)
		}
		w.WaitLog(t, `server=broken attempt=3`, 30*time.Second)
		time.Sleep(3 * time.Second)

		if got := p.Starts(t, "off"); len(got) != 0 {
			t.Fatalf("the disabled server was started %d times", len(got))
		}
		if got := p.Count(t, "auth", "request"); got != authRequests {
			t.Fatalf("the needs_auth server got %d requests after start-up, want 0", got-authRequests)
		}
		st = oc.Status(t, p.Dir)
		if st["off"].Status != "disabled" || st["auth"].Status != "needs_auth" {
			t.Fatalf("final status = %+v", st)
		}
		status, _ := exec.Command(reconnectBin, "status", "--status-addr", w.StatusAddr).CombinedOutput()
		if !strings.Contains(string(status), "opencode mcp auth auth") {
			t.Fatalf("status lacks the auth hint:\n%s", status)
		}
	})
}

// After a client disposes of a directory (1.x POST /instance/dispose, 2.x
// DELETE /api/debug/location) the daemon stops touching it: its instance
// is not re-created and no MCP process appears.
func TestWatchRespectsDispose(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		w := startWatch(t, oc, oc.Password, "--idle-interval", "1s")
		w.WaitLog(t, "watching opencode", 15*time.Second)
		oc.Status(t, p.Dir)
		n, _ := p.KillConnected(t, oc, "s")
		p.WaitStarts(t, "s", n+1, 30*time.Second) // armed and recovered
		oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)
		w.WaitLog(t, "reconnected MCP server", 10*time.Second)

		oc.Dispose(t, p.Dir)
		w.WaitLog(t, "disarmed directory", 10*time.Second)
		before := len(p.Starts(t, "s"))
		time.Sleep(6 * time.Second) // six idle intervals
		if got := len(p.Starts(t, "s")); got != before {
			t.Fatalf("%d MCP processes appeared after dispose: the daemon re-created the instance", got-before)
		}
	})
}

// OpenCode killed and restarted on the same port under a running watch:
// the daemon re-subscribes and recovers a crash after that.
func TestWatchSurvivesOpenCodeRestart(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.newHome(t)
		oc := g.startOpenCode(t, 0, home)
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		w := startWatch(t, oc, oc.Password)
		w.WaitLog(t, "watching opencode", 15*time.Second)
		w.WaitStreamUp(t, 20*time.Second) // "reconnected" is said of a second subscription

		oc2 := restartOpenCode(t, oc, home)
		w.WaitLog(t, "event stream reconnected", 40*time.Second)

		oc2.Status(t, p.Dir)
		n, _ := p.KillConnected(t, oc2, "s")
		p.WaitStarts(t, "s", n+1, 30*time.Second)
		oc2.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)
	})
}

// A wrong password: a clear message that names the fix, one request, exit 1.
func TestWatchWrongPassword(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		start := time.Now()
		cmd := exec.Command(reconnectBin, "watch", "--url", oc.URL, "--status-addr", "")
		cmd.Env = append(cmd.Environ(), "OPENCODE_SERVER_PASSWORD=not-the-password")
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit = %v, want 1; output:\n%s", err, out)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("took %v to give up", time.Since(start))
		}
		for _, want := range []string{"401", "OPENCODE_SERVER_PASSWORD", "--password"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(string(out), "not-the-password") || strings.Contains(string(out), oc.Password) {
			t.Fatal("a password was printed")
		}
	})
}

// Probes: a remote server down past the fast episode (its backoff would
// wait 5 minutes) is connected within seconds of its endpoint accepting
// connections, once max-delay has passed since its last attempt (in the
// slow tier a probe buys one attempt per max-delay; 4 s here, so the
// test need not wait 30 s).
func TestWatchProbeRecoversRemoteAfterFastEpisode(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc, p, remote, w := lateRemote(t, g, "--max-delay", "4s")
		oc.Status(t, p.Dir)
		w.WaitLog(t, "retrying slowly", 30*time.Second) // the fast episode is spent
		time.Sleep(4 * time.Second)
		remote.Start(t)
		took := oc.WaitStatus(t, p.Dir, "late", "connected", 30*time.Second)
		t.Logf("connected %v after the endpoint came up", took)
		if took > 5*time.Second {
			t.Fatalf("took %v; probes should connect within about a second", took)
		}
		w.WaitLog(t, "reconnected MCP server", 10*time.Second)
	})
}

// A remote server restarted on the same port while OpenCode keeps saying
// connected gets a fresh session: the new process receives an initialize.
// A disabled server stays disabled.
func TestWatchRepairsStaleRemoteSession(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		p := g.newProject(t, nil)
		remote := newHTTPServer(t, p.ServerLog("rem"), "-strict-sessions")
		remote.Start(t)
		rewriteProject(t, p, map[string]any{"rem": RemoteServer(remote.URL), "off": p.Disabled(p.StdioServer("off"))})
		w := startWatch(t, oc, oc.Password, "--directory", p.Dir)
		w.WaitLog(t, "watching opencode", 15*time.Second)
		oc.WaitStatus(t, p.Dir, "rem", "connected", 30*time.Second)
		time.Sleep(2 * time.Second) // the daemon checks and starts watching

		remote.Stop()
		time.Sleep(500 * time.Millisecond)
		remote.Start(t)
		restarted := time.Now()
		deadline := restarted.Add(20 * time.Second)
		for {
			pids := p.Starts(t, "rem")
			fresh := false
			for _, ev := range p.ServerEvents(t, "rem") {
				if ev.Event == "initialize" && ev.PID == pids[len(pids)-1] {
					fresh = true
				}
			}
			if fresh {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the restarted server got no initialize within 20 s (OpenCode says %+v)", oc.Status(t, p.Dir))
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("fresh initialize %v after the restart", time.Since(restarted))
		w.WaitLog(t, "restarted behind OpenCode's back", 5*time.Second)
		st := oc.Status(t, p.Dir)
		if st["rem"].Status != "connected" || st["off"].Status != "disabled" {
			t.Fatalf("status after the repair = %+v", st)
		}
		if got := p.Starts(t, "off"); len(got) != 0 {
			t.Fatalf("the disabled server was started")
		}
	})
}
