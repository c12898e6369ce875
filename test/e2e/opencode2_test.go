package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// OpenCode 2's background service (`opencode serve --service`, which
// every 2.x CLI command starts, and which announces its URL and password
// in $XDG_STATE_HOME/opencode/service.json) is 2.x's alone: these tests
// run the real mcp-reconnect watch, with no flags, against the real
// 2.1.2 service. The 2.x fake (fake2, over loopback TCP) stays only for
// what the released binary cannot show: a service file of another
// release channel. `run` of a 2.x TUI, which needs a terminal and
// attaches to the service, runs a stand-in script.

// writeServiceFile writes OpenCode 2's service.json under state (an
// XDG_STATE_HOME), as the background service does at start.
func writeServiceFile(t *testing.T, state, url, password string, pid int) string {
	t.Helper()
	dir := filepath.Join(state, "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"id": "svc", "version": fake2.DefaultVersion, "url": url, "pid": pid, "password": password})
	file := filepath.Join(dir, "service.json")
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// serveHTTP serves h on a loopback port until the test ends.
func serveHTTP(t testing.TB, h http.Handler) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(func() { closeHTTP(s) })
	return s
}

// closeHTTP stops s, event streams included (Close alone waits for them).
func closeHTTP(s *httptest.Server) {
	s.CloseClientConnections()
	s.Close()
}

// v2Env is an environment with no OpenCode URL or password and its own
// state, config and cache directories (the cache beside the state).
func v2Env(state, config string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "OPENCODE_URL", "OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME", "OPENCODE_PASSWORD", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "XDG_STATE_HOME="+state, "XDG_CONFIG_HOME="+config, "XDG_CACHE_HOME="+filepath.Join(state, "cache"))
}

// waitRequests waits until fake has served a status read for dir.
func waitStatusRead(t *testing.T, fake *fake2.Server, dir string, logs *ochost.Buffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for fake.Count(fake2.RouteMCP, dir, "") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no status read of %s on the 2.x server within 30 s; watch output:\n%s", dir, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startServiceWatch runs `mcp-reconnect watch` with no URL and no
// password, as the daemon installed at login runs, in home's hermetic
// directories: it finds OpenCode 2's background service through home's
// $XDG_STATE_HOME/opencode/service.json, whenever that appears.
func startServiceWatch(t *testing.T, home string) *Watcher {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	w := &Watcher{StatusAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Log: &ochost.Buffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(reconnectBin, "watch", "--status-addr", w.StatusAddr, "--log-level", "debug")
	w.cmd.Env = v2Env(filepath.Join(home, "state"), filepath.Join(home, "config"))
	w.cmd.Stdout, w.cmd.Stderr = w.Log, w.Log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
			t.Errorf("watch did not stop within 10 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("watch output:\n%s", w.Log)
		}
	})
	return w
}

// waitFollowing waits until w says it follows svc: its URL and pid, as
// its service file names them.
func (w *Watcher) waitFollowing(t *testing.T, svc *OpenCode, timeout time.Duration) {
	t.Helper()
	w.WaitLog(t, fmt.Sprintf(`following the OpenCode 2 service" file=%s url=%s pid=%d `, svc.ServiceFile(), svc.URL, svc.PID()), timeout)
}

// stopService stops svc as `opencode service stop` does (SIGTERM): it
// ends its MCP servers and removes its service.json.
func stopService(t *testing.T, svc *OpenCode) {
	t.Helper()
	if err := syscall.Kill(svc.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the service's exit and its service.json gone", func() bool {
		_, err := os.Stat(svc.ServiceFile())
		return os.IsNotExist(err) && syscall.Kill(svc.PID(), 0) != nil
	})
}

// crashRepaired: a client uses p on oc (its servers start there), p's
// stdio server name is killed, and the daemon brings it back: a new
// process, and OpenCode says connected.
func crashRepaired(t *testing.T, oc *OpenCode, p *Project, name string) {
	t.Helper()
	n := len(p.Starts(t, name))
	if st := oc.Status(t, p.Dir); st[name].Status != "connected" {
		t.Fatalf("before the crash: %+v", st)
	}
	p.WaitStarts(t, name, n+1, 30*time.Second)
	pids := p.Starts(t, name)
	crashed := time.Now()
	killPID(t, pids[len(pids)-1])
	p.WaitStarts(t, name, n+2, 30*time.Second)
	oc.WaitStatus(t, p.Dir, name, "connected", 30*time.Second)
	t.Logf("%s in %s: connected again %v after the kill", name, p.Dir, time.Since(crashed).Round(10*time.Millisecond))
}

// noSecret fails when one of the passwords reached w's output.
func noSecret(t *testing.T, w *Watcher, passwords ...string) {
	t.Helper()
	for _, pw := range passwords {
		if strings.Contains(w.Log.String(), pw) {
			t.Errorf("a service password reached the watcher's output")
		}
	}
}

// `watch` with no flags finds the OpenCode 2 background service from its
// service.json (URL, password, pid) and repairs a stdio crash in a
// location of the service; when the service restarts (as `opencode
// service restart` does) on another port with another password, it
// follows it there and repairs there, never asking the new service
// about a directory nobody used since.
func TestWatchFollowsOpenCode2Service(t *testing.T) {
	g := generations[1]
	home := g.newHome(t)
	first := g.start(t, ochost.Options{Service: true, Home: home, Password: "first-secret-pw"})
	w := startServiceWatch(t, home)
	w.waitFollowing(t, first, 30*time.Second)
	w.WaitLog(t, "generation=2.x", 10*time.Second)

	before := g.newProject(t, nil)
	rewriteProject(t, before, map[string]any{"s": before.StdioServer("s")})
	crashRepaired(t, first, before, "s")
	w.WaitLog(t, "reason="+g.CrashEvent, 10*time.Second)

	stopService(t, first)
	second := g.start(t, ochost.Options{Service: true, Home: home, Password: "second-secret-pw"})
	if second.Port == first.Port {
		t.Fatalf("the service came back on its old port %d", first.Port)
	}
	w.waitFollowing(t, second, 60*time.Second)
	after := g.newProject(t, nil)
	rewriteProject(t, after, map[string]any{"s": after.StdioServer("s")})
	crashRepaired(t, second, after, "s")
	time.Sleep(2 * time.Second)
	if n := len(before.Starts(t, "s")); n != 2 {
		t.Fatalf("the directory used only before the restart started %d processes, want its 2: the daemon booted it on the new service", n)
	}
	if strings.Contains(w.Log.String(), "refused the credentials") {
		t.Fatalf("a request to the new service was refused: the old password was used")
	}
	noSecret(t, w, "first-secret-pw", "second-secret-pw")
}

// `run` on OpenCode 2: the TUI attaches to the shared service, so run
// makes sure one daemon watches that service (started once, detached,
// found in the registry) and then becomes the command: same arguments (no
// --port), same exit code. The daemon is not the command's child (the TUI
// would never reap it).
func TestRunOnOpenCode2StartsOneServiceWatch(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	state, config, bin := t.TempDir(), t.TempDir(), t.TempDir()
	argsFile := filepath.Join(bin, "args")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 2.0.21; exit 0; fi\necho \"$@\" >> " + argsFile + "\nsleep 0.5\nexit 7\n"
	oc := filepath.Join(bin, "opencode")
	if err := os.WriteFile(oc, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	reg := &registry.Registry{Dir: filepath.Join(state, "mcp-reconnect", "daemons")}
	t.Cleanup(func() {
		entries, _ := reg.List()
		for _, e := range entries {
			_ = syscall.Kill(e.PID, syscall.SIGTERM)
		}
	})
	for i := range 2 {
		cmd := exec.Command(reconnectBin, "run", "--", oc, "--auto")
		cmd.Env = v2Env(state, config)
		out := &ochost.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// run has made sure of the daemon before it became the command.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if b, _ := os.ReadFile(argsFile); len(b) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the command never ran; output:\n%s", out)
				}
			}
			entries, _ := reg.List()
			for _, e := range entries {
				if slices.Contains(childPIDs(cmd.Process.Pid), e.PID) {
					t.Errorf("the service daemon (pid %d) is a child of the command run became", e.PID)
				}
			}
		}
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
			t.Fatalf("run %d: exit %v, want the command's 7; output:\n%s", i, err, out)
		}
	}
	args, _ := os.ReadFile(argsFile)
	if got := string(args); got != "--auto\n--auto\n" {
		t.Fatalf("the command got %q, want its own arguments untouched", got)
	}
	entries, err := reg.List()
	if err != nil {
		t.Fatal(err)
	}
	var watching []registry.Entry
	for _, e := range entries {
		if e.Service == filepath.Join(state, "opencode", "service.json") {
			watching = append(watching, e)
		}
	}
	if len(watching) != 1 {
		t.Fatalf("daemons following the service = %d, want 1 (registry: %+v)", len(watching), entries)
	}
	if err := syscall.Kill(watching[0].PID, 0); err != nil {
		t.Fatalf("the service daemon is not running: %v", err)
	}
}

// A running watch that started against 1.18.34 follows the server when
// it is replaced by 2.1.2 on the same port with the same password (an
// upgrade under a running daemon): it finds the new generation when its
// event stream comes back, forgets the directories the old process had
// (the new one boots none of them: their servers do not start), and
// repairs a crash through 2.x's API from then on, without a restart of
// the daemon. One test for the two generations: it is the move from one
// to the other.
func TestWatchFollowsUpgradeFrom1To2(t *testing.T) {
	g1, g2 := generations[0], generations[1]
	needBinary(t, g2.Bin, g2.Name)
	const password = "upgrade-secret-pw"
	v1 := g1.start(t, ochost.Options{Password: password})
	w := startWatch(t, v1, password)
	w.WaitLog(t, "generation=1.x", 30*time.Second)
	old := g1.newProject(t, nil)
	rewriteProject(t, old, map[string]any{"s": old.StdioServer("s")})
	crashRepaired(t, v1, old, "s")
	w.WaitLog(t, "reason="+g1.CrashEvent, 10*time.Second)

	v1.Kill()
	// The old directory in 2.x's words: were the daemon to read it on
	// the new server, its location would boot and its server start.
	if err := os.Remove(filepath.Join(old.Dir, ochost.Gen1.ConfigFile())); err != nil {
		t.Fatal(err)
	}
	if err := ochost.Gen2.WriteConfig(old.Dir, map[string]any{"s": old.StdioServer("s")}); err != nil {
		t.Fatal(err)
	}
	v2 := g2.start(t, ochost.Options{Port: v1.Port, Password: password})
	w.WaitLog(t, "generation=2.x", 60*time.Second)
	fresh := g2.newProject(t, nil)
	rewriteProject(t, fresh, map[string]any{"s": fresh.StdioServer("s")})
	crashRepaired(t, v2, fresh, "s")
	w.WaitLog(t, "reason="+g2.CrashEvent, 10*time.Second)
	time.Sleep(2 * time.Second)
	if n := len(old.Starts(t, "s")); n != 2 {
		t.Fatalf("the old process's directory started %d processes, want its 2 on 1.x: the daemon booted it on 2.x", n)
	}
}

// The installed `watch` (no flags, started at login before OpenCode 2's
// service) follows a service that starts after it, and one that goes
// away (its service.json removed at a clean exit) and comes back, here on
// another port with another password; in each it repairs a stdio crash.
// Meanwhile it is registered as following the service file, so `run`
// starts no second daemon, and it looks at most every few seconds (one
// attempt a stat of the file and one refused loopback connection).
func TestWatchFollowsAServiceThatStartsLater(t *testing.T) {
	g := generations[1]
	needBinary(t, g.Bin, g.Name)
	home := g.newHome(t)
	file := filepath.Join(home, "state", "opencode", "service.json")
	w := startServiceWatch(t, home)
	reg := &registry.Registry{Dir: filepath.Join(home, "state", "mcp-reconnect", "daemons")}
	waitFor(t, 20*time.Second, "watch registered as following "+file, func() bool {
		ok, _ := daemonServiceWatched(reg, file)
		return ok
	})
	time.Sleep(3 * time.Second) // no service yet: the watch is waiting

	first := g.start(t, ochost.Options{Service: true, Home: home, Password: "late-secret-pw"})
	started := time.Now()
	w.waitFollowing(t, first, 20*time.Second)
	t.Logf("followed the service %v after it answered", time.Since(started).Round(100*time.Millisecond))
	one := g.newProject(t, nil)
	rewriteProject(t, one, map[string]any{"s": one.StdioServer("s")})
	crashRepaired(t, first, one, "s")

	stopService(t, first)
	gone := len(w.Log.String())
	time.Sleep(12 * time.Second)
	if n := strings.Count(w.Log.String()[gone:], "event stream ended"); n < 2 || n > 9 {
		t.Errorf("%d attempts in the 12 s without a service, want a few (every ≤ 5 s):\n%s", n, w.Log.String()[gone:])
	}

	second := g.start(t, ochost.Options{Service: true, Home: home, Password: "back-secret-pw"})
	started = time.Now()
	w.waitFollowing(t, second, 20*time.Second)
	t.Logf("followed the service back %v after it answered", time.Since(started).Round(100*time.Millisecond))
	two := g.newProject(t, nil)
	rewriteProject(t, two, map[string]any{"s": two.StdioServer("s")})
	crashRepaired(t, second, two, "s")
	time.Sleep(2 * time.Second)
	if n := len(one.Starts(t, "s")); n != 2 {
		t.Fatalf("the directory used only on the first service started %d processes, want its 2: the daemon booted it on the second", n)
	}
	if ok, _ := daemonServiceWatched(reg, file); !ok {
		t.Fatalf("the daemon no longer counts as following %s", file)
	}
	noSecret(t, w, "late-secret-pw", "back-secret-pw")
}

// A service of another release channel: OpenCode 2 names its file by its
// channel (service.json for latest, service-<channel>.json for others),
// and a daemon that follows service.json looks at the others beside it
// too. The released 2.1.2 is channel latest and writes service.json
// only, so this runs against the 2.x fake: the watch, with no service
// running, follows one that registers as service-beta.json.
func TestWatchFollowsAServiceOfAnotherChannel(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	state, config := t.TempDir(), t.TempDir()
	logs := &ochost.Buffer{}
	cmd := exec.Command(reconnectBin, "watch", "--status-addr", "127.0.0.1:0", "--log-level", "debug")
	cmd.Env = v2Env(state, config)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if strings.Contains(logs.String(), "beta-secret-pw") {
			t.Errorf("the service password reached the watcher's output")
		}
	}()
	time.Sleep(3 * time.Second) // no service yet: the watch is waiting

	beta := fake2.New(map[string]fakeopencode.Spec{"docs": {Status: "failed"}})
	beta.SetPassword("beta-secret-pw")
	beta.SetPID(4004)
	srv := serveHTTP(t, beta)
	written := writeServiceFile(t, state, srv.URL, "beta-secret-pw", 4004)
	if err := os.Rename(written, filepath.Join(filepath.Dir(written), "service-beta.json")); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	waitSubscribed(t, beta, 20*time.Second, logs)
	t.Logf("followed the service %v after it registered", time.Since(started).Round(100*time.Millisecond))
	beta.Boot("/p two") // a session runs there: its location is booted
	beta.Publish("/p two", "session.execution.started", map[string]any{"sessionID": "ses_2"})
	waitStatusRead(t, beta, "/p two", logs)
	waitFor(t, 15*time.Second, "a connect of the failed server", func() bool { return beta.Count(fake2.RouteConnect, "/p two", "docs") > 0 })
}

// daemonServiceWatched reports whether a registered daemon follows file.
func daemonServiceWatched(reg *registry.Registry, file string) (bool, error) {
	entries, err := reg.List()
	for _, e := range entries {
		if e.Service == file {
			return true, nil
		}
	}
	return false, err
}

func waitSubscribed(t *testing.T, fake *fake2.Server, within time.Duration, logs *ochost.Buffer) {
	t.Helper()
	deadline := time.Now().Add(within)
	for fake.Subscribers() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not subscribe to the service within %v:\n%s", within, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
