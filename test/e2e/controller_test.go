package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// On the real binaries: every connect is decided from a fresh read.

// serverState finds one server in the watcher's /status.
func serverState(t *testing.T, w *Watcher, dir, name string) map[string]any {
	t.Helper()
	var st struct {
		Servers []struct {
			Directories []struct {
				Directory string           `json:"directory"`
				Servers   []map[string]any `json:"servers"`
			} `json:"directories"`
		} `json:"servers"`
	}
	b, _ := json.Marshal(w.StatusJSON(t))
	_ = json.Unmarshal(b, &st)
	for _, s := range st.Servers {
		for _, d := range s.Directories {
			if d.Directory != dir {
				continue
			}
			for _, srv := range d.Servers {
				if srv["name"] == name {
					return srv
				}
			}
		}
	}
	return nil
}

// A server the user disables while it waits for a connect slot stays
// disabled: the slot, when it comes, makes its directory re-read status.
func TestWatchDisabledStaysDisabledThroughSlotWait(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		// A local server that answers initialize only after 8 s, with a 5 s
		// startup timeout: it is failed, and each connect of it holds the
		// only local slot (--max-concurrent 1) for about five seconds. (A
		// silent remote URL cannot: with --max-concurrent 1 a remote
		// connect gets a slot of its own beside the local one.)
		busy := g.newProject(t, nil)
		silent := busy.StdioServer("silent")
		silent["command"] = append(silent["command"].([]string), "-start-delay", "8s")
		rewriteProject(t, busy, map[string]any{"silent": busy.WithStartupTimeout(silent, 5000)})
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"f": p.StdioServer("f")})

		w := startWatch(t, oc, oc.Password, "--max-concurrent", "1", "--directory", busy.Dir, "--directory", p.Dir)
		w.WaitLog(t, "watching opencode", 15*time.Second)
		p.WaitStarts(t, "f", 1, 30*time.Second)
		waitFor(t, 90*time.Second, "the silent server to hold the slot", func() bool {
			s := serverState(t, w, busy.Dir, "silent")
			return s != nil && s["connecting"] == true
		})
		p.KillConnected(t, oc, "f") // f crashes while the slot is held
		waitFor(t, 10*time.Second, "f to wait for a slot", func() bool {
			s := serverState(t, w, p.Dir, "f")
			return s != nil && s["waiting_for_slot"] == true
		})
		oc.Disconnect(t, p.Dir, "f")
		starts := len(p.Starts(t, "f"))
		time.Sleep(15 * time.Second) // the slot comes free meanwhile
		if st := oc.Status(t, p.Dir); st["f"].Status != "disabled" {
			t.Fatalf("f is %q after the slot wait, want disabled: the daemon connected it", st["f"].Status)
		}
		if got := len(p.Starts(t, "f")); got != starts {
			t.Fatalf("f was started %d times after the user disabled it", got-starts)
		}
	})
}

// waitFor polls cond every 100 ms until it holds, or fails the test.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A remote server the user disabled stays disabled when its endpoint
// restarts: the restart repair re-reads status first.
func TestWatchDisabledStaysDisabledThroughRestartRepair(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		p := g.newProject(t, nil)
		remote := newHTTPServer(t, p.ServerLog("rem"), "-strict-sessions")
		remote.Start(t)
		rewriteProject(t, p, map[string]any{"rem": RemoteServer(remote.URL)})
		w := startWatch(t, oc, oc.Password, "--directory", p.Dir)
		w.WaitLog(t, "watching opencode", 15*time.Second)
		oc.WaitStatus(t, p.Dir, "rem", "connected", 30*time.Second)
		time.Sleep(2 * time.Second) // the daemon checks and starts watching the endpoint

		oc.Disconnect(t, p.Dir, "rem")
		inits := p.Count(t, "rem", "initialize")
		remote.Stop()
		time.Sleep(500 * time.Millisecond)
		remote.Start(t)
		time.Sleep(8 * time.Second)
		if st := oc.Status(t, p.Dir); st["rem"].Status != "disabled" {
			t.Fatalf("rem is %q after its endpoint restarted, want disabled", st["rem"].Status)
		}
		if got := p.Count(t, "rem", "initialize"); got != inits {
			t.Fatalf("the disabled server got %d initialize after its restart", got-inits)
		}
	})
}

// A stdio server that exits two seconds after every start reaches the slow
// tier: it is started the fast episode's five times after its first
// crash, then no more for minutes.
func TestWatchCrashLoopReachesSlowTier(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		p := g.newProject(t, nil)
		s := p.StdioServer("loop")
		s["command"] = append(s["command"].([]string), "-exit-after", "2s")
		rewriteProject(t, p, map[string]any{"loop": s})
		w := startWatch(t, oc, oc.Password, "--directory", p.Dir)
		w.WaitLog(t, "watching opencode", 15*time.Second)
		w.WaitLog(t, "retrying slowly", 90*time.Second)
		starts := len(p.Starts(t, "loop"))
		t.Logf("started %d times before the slow tier", starts)
		if starts < 5 || starts > 7 {
			t.Fatalf("started %d times before the slow tier, want the first start plus about five attempts", starts)
		}
		time.Sleep(20 * time.Second)
		if got := len(p.Starts(t, "loop")); got != starts {
			t.Fatalf("started %d more times in the slow tier within 20 s", got-starts)
		}
		if s := serverState(t, w, p.Dir, "loop"); s == nil || s["tier"] != "slow" {
			t.Fatalf("status of loop = %v, want the slow tier", s)
		}
	})
}

// OpenCode killed and restarted under watch: the daemon forgets its
// directories, and no instance is created for one (no MCP process starts)
// until a client uses it again; a directory named with --directory is the
// user's and is watched in the new process too.
func TestWatchOpenCodeRestartCreatesNoInstance(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.newHome(t)
		oc := g.startOpenCode(t, 0, home)
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		named := g.newProject(t, nil) // named with --directory: kept through restarts
		rewriteProject(t, named, map[string]any{"n": named.StdioServer("n")})
		w := startWatch(t, oc, oc.Password, "--directory", named.Dir, "--idle-interval", "2s")
		w.WaitLog(t, "watching opencode", 15*time.Second)
		named.WaitStarts(t, "n", 1, 30*time.Second)
		openProject(t, oc, p.Dir) // a client uses p: the daemon arms it
		p.WaitStarts(t, "s", 1, 30*time.Second)
		waitFor(t, 20*time.Second, "p armed by the session", func() bool { return len(serverDirs(t, w)) >= 2 })

		oc2 := restartOpenCode(t, oc, home)
		w.WaitLog(t, "forgetting every directory", 40*time.Second)
		time.Sleep(10 * time.Second) // five idle intervals
		if got := len(p.Starts(t, "s")); got != 1 {
			t.Fatalf("%d MCP processes after OpenCode restarted: the daemon re-created an instance nobody used", got-1)
		}
		if dirs := serverDirs(t, w); len(dirs) != 1 || dirs[0] != named.Dir {
			t.Fatalf("armed after the restart: %v, want only the --directory one", dirs)
		}
		// The directory the user named is watched in the new process too.
		named.WaitStarts(t, "n", 2, 30*time.Second)

		// A client uses the directory again: it is armed and watched.
		openProject(t, oc2, p.Dir)
		waitFor(t, 20*time.Second, "p armed again after a client used it", func() bool { return len(serverDirs(t, w)) >= 2 })
	})
}

// serverDirs lists the directories the watcher has armed.
func serverDirs(t *testing.T, w *Watcher) []string {
	t.Helper()
	var st struct {
		Servers []struct {
			Directories []struct {
				Directory string `json:"directory"`
			} `json:"directories"`
		} `json:"servers"`
	}
	b, _ := json.Marshal(w.StatusJSON(t))
	_ = json.Unmarshal(b, &st)
	var out []string
	for _, s := range st.Servers {
		for _, d := range s.Directories {
			out = append(out, d.Directory)
		}
	}
	return out
}

// Rule 8, the moment a restart is seen: OpenCode is killed while an armed
// directory's idle check is due later, and a new OpenCode is up just
// before that check. The event stream sees the refusal at once and the
// engine forgets the directory then; without that, the check would read
// the new process (the stream's next attempt comes up to 30 s later) and
// create an instance, and an MCP fleet, nobody uses.
func TestWatchOpenCodeRestartBeforeAnIdleCheckCreatesNoInstance(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.newHome(t)
		oc := g.startOpenCode(t, 0, home)
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		// A long idle interval: the new OpenCode must be up before the due
		// check, and it takes up to about 15 s to answer on a loaded machine.
		w := startWatch(t, oc, oc.Password, "--idle-interval", "60s", "--jitter", "0")
		w.WaitLog(t, "watching opencode", 15*time.Second)
		w.WaitStreamUp(t, 20*time.Second) // the session event must reach it
		openProject(t, oc, p.Dir)         // a client uses p: the daemon arms it
		p.WaitStarts(t, "s", 1, 30*time.Second)
		var next time.Time
		waitFor(t, 20*time.Second, "p checked once", func() bool {
			next = nextCheck(t, w, p.Dir)
			return !next.IsZero() && time.Until(next) > 45*time.Second
		})

		killed := time.Now()
		oc.Kill()
		w.WaitLog(t, "forgetting every directory", 5*time.Second)
		t.Logf("the engine forgot the directories %v after the kill", time.Since(killed).Round(100*time.Millisecond))
		time.Sleep(time.Until(next.Add(-25 * time.Second)))
		g.start(t, ochost.Options{Port: oc.Port, Home: home, Password: oc.Password})
		if time.Now().After(next) {
			t.Fatalf("the new OpenCode took until %v after the due check to start; the scenario did not happen", time.Since(next))
		}
		time.Sleep(time.Until(next.Add(5 * time.Second)))
		if got := len(p.Starts(t, "s")); got != 1 {
			t.Fatalf("%d MCP processes after OpenCode restarted: the due check read the new process", got)
		}
		if dirs := serverDirs(t, w); len(dirs) != 0 {
			t.Fatalf("armed after the restart: %v, want none", dirs)
		}
	})
}

// nextCheck is the next_check the watcher reports for dir (zero if none).
func nextCheck(t *testing.T, w *Watcher, dir string) time.Time {
	t.Helper()
	var st struct {
		Servers []struct {
			Directories []struct {
				Directory string    `json:"directory"`
				NextCheck time.Time `json:"next_check"`
				LastCheck time.Time `json:"last_check"`
			} `json:"directories"`
		} `json:"servers"`
	}
	b, _ := json.Marshal(w.StatusJSON(t))
	_ = json.Unmarshal(b, &st)
	for _, s := range st.Servers {
		for _, d := range s.Directories {
			if d.Directory == dir && !d.LastCheck.IsZero() {
				return d.NextCheck
			}
		}
	}
	return time.Time{}
}
