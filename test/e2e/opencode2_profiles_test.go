package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/ochost"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// The real mcp-reconnect binary against both profiles of the 2.x fake over
// real loopback TCP: OpenCode 2.1.2 as measured, and the v2 preview
// build as measured (facts section 6; the fake serves that server's own
// API description and the routes it lists).

const profilePassword = "profile-secret-pw"

// profileEnv is an environment with no OpenCode URL, password or config
// of the machine's: its own state and config directories.
func profileEnv(t testing.TB) []string {
	var env []string
	for _, kv := range v2Env(t.TempDir(), t.TempDir()) {
		name, _, _ := strings.Cut(kv, "=")
		if name == "OPENCODE_CONFIG" || name == "OPENCODE_CONFIG_DIR" || name == "OPENCODE_CONFIG_CONTENT" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "OPENCODE_SERVER_PASSWORD="+profilePassword)
}

// watchFake runs `mcp-reconnect watch --url url` until the test ends.
func watchFake(t testing.TB, url string, args ...string) *ochost.Buffer {
	t.Helper()
	logs := &ochost.Buffer{}
	cmd := exec.Command(reconnectBin, append([]string{"watch", "--url", url, "--status-addr", "127.0.0.1:0", "--log-level", "debug"}, args...)...)
	cmd.Env = profileEnv(t)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if strings.Contains(logs.String(), profilePassword) {
			t.Error("the password reached the watcher's output")
		}
		if t.Failed() {
			t.Logf("watch output:\n%s", logs)
		}
	})
	return logs
}

// Each profile is detected as OpenCode 2 with its own version, the routes
// it offers are chosen from its description and said once in the log, a
// failed server is connected on the route that profile has, and no route
// it lacks is asked after detection. doctor says the same per capability.
func TestOpenCode2ProfilesDetected(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, c := range []struct {
		profile fake2.Profile
		connect string // the route connects reach
		lacks   string // what the log says the daemon runs without
		uses    string // a doctor line
	}{
		{fake2.Release212, fake2.RouteConnect, `locations="GET /api/debug/location"`, "uses connect     POST /api/experimental/mcp/{name}/connect"},
		{fake2.Preview, fake2.RouteConnectDev, "running_without=config", "uses connect     POST /api/mcp/{name}/connect"},
	} {
		t.Run(c.profile.Name, func(t *testing.T) {
			fake := fake2.NewProfile(c.profile, map[string]fakeopencode.Spec{"docs": {Status: "failed", AfterConnect: "connected"}})
			fake.SetPassword(profilePassword)
			srv := serveHTTP(t, fake)
			dir := t.TempDir()
			logs := watchFake(t, srv.URL)
			waitFor(t, 20*time.Second, "subscribed to /api/event", func() bool { return fake.Subscribers() > 0 })
			if !strings.Contains(logs.String(), "generation=2.x") || !strings.Contains(logs.String(), "version="+c.profile.Version) {
				t.Fatalf("the log does not say it found OpenCode 2 %s", c.profile.Version)
			}
			fake.Boot(dir) // a TUI there: 2.x publishes only for a location it runs
			// A prompt in dir: the preview sends its execution without a
			// location, after an input that has one.
			fake.Publish(dir, "session.input.admitted", map[string]any{"sessionID": "ses_e2e", "inputID": "msg_1"})
			fake.Publish(dir, "session.execution.started", map[string]any{"sessionID": "ses_e2e"})
			waitFor(t, 20*time.Second, "a connect of the failed server", func() bool { return fake.Count(c.connect, dir, "docs") > 0 })
			if n := strings.Count(logs.String(), "OpenCode 2 routes"); n != 1 || !strings.Contains(logs.String(), c.lacks) {
				t.Fatalf("the routes were said %d times (want once, with %s)", n, c.lacks)
			}
			// Detection asks /api/info first (the preview lacks it); after
			// that, never a route the server lacks.
			unknown := 0
			if c.profile.Name == fake2.Preview.Name {
				unknown = 1
			}
			if n := fake.Count(fake2.RouteUnknownAPI, "", ""); n != unknown {
				t.Fatalf("%d requests of routes the server lacks, want %d: %+v", n, unknown, fake.Requests())
			}
			if n := fake.Count(fake2.RouteDoc, "", ""); n != 1 {
				t.Fatalf("the description was read %d times, want once per detection", n)
			}

			cmd := exec.Command(reconnectBin, "doctor", "--url", srv.URL)
			cmd.Env = profileEnv(t)
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), c.uses) || strings.Contains(string(out), "FAIL") {
				t.Fatalf("doctor:\n%s", out)
			}
		})
	}
}

// A remote server restarted behind OpenCode's back (on the preview it
// shows no event and stays "connected") is repaired on both profiles:
// 2.1.2 names its URL in GET /api/config; the preview has no such route,
// and the daemon learns the URL from the directory's opencode.jsonc. The
// daemon watches the endpoint and connects the server for a fresh session
// when a real streamable-HTTP MCP server is stopped and started again on
// its port.
func TestOpenCode2RemoteRestartRepaired(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, c := range []struct {
		profile fake2.Profile
		connect string
	}{{fake2.Release212, fake2.RouteConnect}, {fake2.Preview, fake2.RouteConnectDev}} {
		t.Run(c.profile.Name, func(t *testing.T) {
			p := newProject(t, nil)
			remote := newHTTPServer(t, p.ServerLog("web"))
			remote.Start(t)
			// 2.x's shape, with a comment: OpenCode reads JSONC.
			cfg := "{\n  // the remote under test\n  \"mcp\": {\"servers\": {\"web\": {\"type\": \"remote\", \"url\": \"" + remote.URL + "\"},},},\n}\n"
			if err := os.Remove(p.Dir + "/opencode.json"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p.Dir+"/opencode.jsonc", []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			fake := fake2.NewProfile(c.profile, nil)
			fake.SetDirConfig(p.Dir, map[string]fakeopencode.Spec{"web": {Type: "remote", URL: remote.URL}})
			fake.SetPassword(profilePassword)
			srv := serveHTTP(t, fake)
			watchFake(t, srv.URL, "--directory", p.Dir)
			waitFor(t, 20*time.Second, "a status read of the directory", func() bool { return fake.Count(fake2.RouteMCP, p.Dir, "") > 0 })
			time.Sleep(2 * time.Second) // the daemon checks and starts watching the endpoint
			if n := fake.Count(c.connect, p.Dir, "web"); n != 0 {
				t.Fatalf("%d connects of a connected remote before its restart", n)
			}

			remote.Stop()
			time.Sleep(500 * time.Millisecond)
			remote.Start(t)
			restarted := time.Now()
			waitFor(t, 20*time.Second, "a connect of the restarted remote", func() bool { return fake.Count(c.connect, p.Dir, "web") > 0 })
			t.Logf("connect %v after the restart", time.Since(restarted))
			if c.profile.Name == fake2.Preview.Name {
				if n := fake.Count(fake2.RouteConfig, "", "") + fake.Count(fake2.RouteConnect, "", ""); n != 0 {
					t.Fatalf("%d requests of routes the preview lacks", n)
				}
			}
		})
	}
}

// The real OpenCode 1.18.34 serves some /api/* routes too (/api/health
// answers {"healthy":true}) and refuses a wrong password with the same
// empty Basic-realm 401 as the v2 preview build at /api/info and
// /global/health: detection must still call it 1.x, and a wrong password
// 1.x's refusal with 1.x's fix.
func TestDetectReal1xIsNotOpenCode2(t *testing.T) {
	oc := startOpenCode(t, 0, "")
	gen, version, _, err := opencode.Detect(context.Background(), oc.URL, opencode.Options{Password: oc.Password})
	if err != nil || gen != opencode.V1 || version != "1.18.34" {
		t.Fatalf("right password: %v %q %v", gen, version, err)
	}
	gen, _, _, err = opencode.Detect(context.Background(), oc.URL, opencode.Options{Password: "wrong-password"})
	if gen == opencode.V2 || !errors.Is(err, opencode.ErrUnauthorized) || !strings.Contains(err.Error(), "--username") || strings.Contains(err.Error(), "service.json") {
		t.Fatalf("wrong password: %v %v, want 1.x's refusal and fix", gen, err)
	}
}

// connectAfter is how long after t the first connect of name in dir on
// route reached fake, or -1.
func connectAfter(fake *fake2.Server, route, dir, name string, t0 time.Time) time.Duration {
	for _, q := range fake.Requests() {
		if q.Route == route && q.Directory == dir && q.Name == name && !q.Time.Before(t0) {
			return q.Time.Sub(t0)
		}
	}
	return -1
}

// A first crash is retried at once on OpenCode 2 too: the crash's
// mcp.status.changed, for a server last seen connected, reads the
// directory now and connects what the read shows failed. On both
// profiles, over real TCP; well within 0.3 s (the fake spawns nothing).
func TestOpenCode2StdioCrashRepairedAtOnce(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, c := range []struct {
		profile fake2.Profile
		connect string
	}{{fake2.Release212, fake2.RouteConnect}, {fake2.Preview, fake2.RouteConnectDev}} {
		t.Run(c.profile.Name, func(t *testing.T) {
			fake := fake2.NewProfile(c.profile, map[string]fakeopencode.Spec{"fs": {AfterConnect: "connected"}})
			fake.SetPassword(profilePassword)
			srv := serveHTTP(t, fake)
			dir := t.TempDir()
			watchFake(t, srv.URL)
			waitFor(t, 20*time.Second, "subscribed to /api/event", func() bool { return fake.Subscribers() > 0 })
			fake.Boot(dir) // a TUI there
			fake.Publish(dir, "session.created", map[string]any{"sessionID": "ses_1"})
			waitFor(t, 20*time.Second, "a status read of the directory", func() bool { return fake.Count(fake2.RouteMCP, dir, "") > 0 })
			time.Sleep(3 * time.Second) // connected and stable for a few seconds
			crashed := time.Now()
			fake.Crash(dir, "fs")
			waitFor(t, 10*time.Second, "a connect of the crashed server", func() bool { return connectAfter(fake, c.connect, dir, "fs", crashed) >= 0 })
			took := connectAfter(fake, c.connect, dir, "fs", crashed)
			t.Logf("connect %v after the crash", took)
			if took > 300*time.Millisecond {
				t.Fatalf("the crashed server was connected %v after its crash, want at once (< 0.3 s, not initial-delay)", took)
			}
		})
	}
}

// A disposal stays disposed on OpenCode 2: 2.1.2 announces
// location.shutdown (and then its servers' mcp.status.changed); the preview announces nothing but its servers'
// mcp.status.changed, and the daemon, asking GET /api/debug/location
// before the check those changes wake, finds the location gone. Neither
// boots it again, however long it waits; a session there arms it again.
func TestOpenCode2DisposalStaysDisposed(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, profile := range []fake2.Profile{fake2.Release212, fake2.Preview} {
		t.Run(profile.Name, func(t *testing.T) {
			fake := fake2.NewProfile(profile, map[string]fakeopencode.Spec{"fs": {}, "broken": {Status: "failed"}})
			fake.SetPassword(profilePassword)
			srv := serveHTTP(t, fake)
			dir := t.TempDir()
			watchFake(t, srv.URL, "--idle-interval", "3s")
			waitFor(t, 20*time.Second, "subscribed to /api/event", func() bool { return fake.Subscribers() > 0 })
			fake.Boot(dir)
			fake.Publish(dir, "session.created", map[string]any{"sessionID": "ses_1"})
			waitFor(t, 20*time.Second, "a status read of the directory", func() bool { return fake.Count(fake2.RouteMCP, dir, "") > 0 })
			time.Sleep(4 * time.Second)
			fake.Shutdown(dir)
			disposed := time.Now()
			time.Sleep(10 * time.Second) // three idle intervals, and the broken server's backoff
			for _, q := range fake.Requests() {
				if q.Directory == dir && q.Time.After(disposed) {
					t.Fatalf("%s %s for the disposed location %v after the disposal", q.Method, q.Route, q.Time.Sub(disposed))
				}
			}
			for _, d := range fake.Instances() {
				if d == dir {
					t.Fatal("the daemon booted the disposed location again")
				}
			}
			fake.Boot(dir)
			fake.Publish(dir, "session.created", map[string]any{"sessionID": "ses_2"})
			rearmed := time.Now()
			waitFor(t, 20*time.Second, "a status read after a session there", func() bool {
				return connectAfter(fake, fake2.RouteMCP, dir, "", rearmed) >= 0
			})
		})
	}
}
