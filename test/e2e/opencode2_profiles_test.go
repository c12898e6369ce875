package e2e

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// Detection and the first-crash repair on both real generations; and the
// real mcp-reconnect binary against the 2.x fake over real loopback TCP,
// for what the real server cannot show on demand (it counts every
// request by directory).

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

// Detection tells each real generation by its own answers, with its
// version, and a wrong password is that generation's refusal with that
// generation's fix. 1.18.34 serves some /api/* routes too (/api/health
// answers {"healthy":true}) and refuses a wrong password with the same
// empty Basic-realm 401 at /api/info and /global/health: it must still
// be called 1.x, and its refusal given
// 1.x's fix; 2.1.2 refuses with its UnauthorizedError.
func TestDetectTellsTheGenerationOfRealOpenCode(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		other := generations[0]
		if other.Gen == g.Gen {
			other = generations[1]
		}
		gen, version, pid, err := opencode.Detect(context.Background(), oc.URL, opencode.Options{Password: oc.Password})
		if err != nil || gen.String() != g.Gen.String() || version != g.Name {
			t.Fatalf("right password: %v %q %v, want %s %s", gen, version, err, g.Gen, g.Name)
		}
		t.Logf("detected %v %s (pid %d)", gen, version, pid)
		gen, _, _, err = opencode.Detect(context.Background(), oc.URL, opencode.Options{Password: "wrong-password"})
		// A refusal need not name the generation (1.x's only says 401),
		// but must never name the other one.
		if gen.String() == other.Gen.String() || !errors.Is(err, opencode.ErrUnauthorized) || !strings.Contains(err.Error(), g.PasswordFix) || strings.Contains(err.Error(), other.PasswordFix) {
			t.Fatalf("wrong password: %v %v, want %s's refusal and its fix (%q)", gen, err, g.Gen, g.PasswordFix)
		}
	})
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

// A first crash is retried at once, on both generations: OpenCode's
// report of the crash (1.x mcp.tools.changed, 2.x mcp.status.changed)
// for a server last seen connected, with a clear counter, reads the
// directory now and connects what the read shows failed; it does not
// wait out initial-delay (5 s here, so a wait cannot pass for "at
// once"). The new process is up well within 3 s of the kill, spawn and
// handshake included.
func TestFirstCrashRepairedAtOnce(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"fs": p.StdioServer("fs")})
		w := startWatch(t, oc, oc.Password, "--initial-delay", "5s")
		w.WaitLog(t, "watching opencode", 30*time.Second)
		if st := oc.Status(t, p.Dir); st["fs"].Status != "connected" {
			t.Fatalf("before the crash: %+v", st)
		}
		time.Sleep(3 * time.Second) // connected and stable for a few seconds
		n, crashed := p.KillConnected(t, oc, "fs")
		p.WaitStarts(t, "fs", n+1, 30*time.Second)
		took := time.Since(crashed)
		oc.WaitStatus(t, p.Dir, "fs", "connected", 30*time.Second)
		t.Logf("a new process %v after the crash", took.Round(10*time.Millisecond))
		if took > 3*time.Second {
			t.Fatalf("the crashed server was started again %v after its crash, want at once (< 3 s, not initial-delay's 5 s)", took)
		}
		w.WaitLog(t, "reason="+g.CrashEvent, 5*time.Second)
	})
}

// A disposal stays disposed on OpenCode 2: 2.1.2 announces
// location.shutdown, and the daemon does not boot the location again,
// however long it waits; a session there arms it again.
// On the fake, which counts every request by directory: the real 2.1.2's
// disposal is TestWatchRespectsDispose, on both generations, which sees a
// boot only by the servers it starts.
func TestOpenCode2DisposalStaysDisposed(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, profile := range []fake2.Profile{fake2.Release212} {
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
