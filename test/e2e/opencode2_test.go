package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/ochost"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// OpenCode 2 cannot be installed here (the npm registry serves 1.x only):
// these tests run the real mcp-reconnect binary against the 2.x fake, built
// from what docs/opencode.md says of 2.x, over real loopback TCP.

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

// `watch` with no flags finds the OpenCode 2 service from its service.json
// (URL, password, pid), and follows it when it restarts on another port
// with another password.
func TestWatchFollowsOpenCode2Service(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	state, config := t.TempDir(), t.TempDir()
	first := fake2.New(map[string]fakeopencode.Spec{"docs": {Status: "failed"}})
	first.SetPassword("first-secret-pw")
	first.SetPID(1001)
	srv1 := serveHTTP(t, first)
	file := writeServiceFile(t, state, srv1.URL, "first-secret-pw", 1001)

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
		for _, secret := range []string{"first-secret-pw", "second-secret-pw"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the service password %q reached the watcher's output", secret)
			}
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for first.Subscribers() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("watch never subscribed to the 2.x event stream:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), file) || !strings.Contains(logs.String(), "generation=2.x") {
		t.Fatalf("watch did not say it follows %s on 2.x:\n%s", file, logs)
	}
	first.Boot("/p one") // a session runs there: its location is booted
	first.Publish("/p one", "session.execution.started", map[string]any{"sessionID": "ses_1"})
	waitStatusRead(t, first, "/p one", logs)

	// The service restarts on another port with another password.
	closeHTTP(srv1)
	second := fake2.New(map[string]fakeopencode.Spec{"docs": {Status: "failed"}})
	second.SetPassword("second-secret-pw")
	second.SetPID(2002)
	srv2 := serveHTTP(t, second)
	writeServiceFile(t, state, srv2.URL, "second-secret-pw", 2002)
	deadline = time.Now().Add(60 * time.Second)
	for second.Subscribers() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not follow the service to its new port:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	second.Boot("/p two") // a session runs there: its location is booted
	second.Publish("/p two", "session.execution.started", map[string]any{"sessionID": "ses_2"})
	waitStatusRead(t, second, "/p two", logs)
	if n := second.Count(fake2.RouteUnauthorized, "", ""); n != 0 {
		t.Fatalf("%d requests to the new service were refused: the old password was used", n)
	}
	if n := second.Count(fake2.RouteMCP, "/p one", ""); n != 0 {
		t.Fatalf("the restarted service got %d reads for a directory nobody used since", n)
	}
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

// switcher serves one handler, then another: an OpenCode upgraded from
// 1.x to 2.x on the same port.
type switcher struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *switcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func (s *switcher) set(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

// A running watch that started against 1.x follows the server when it is
// replaced by 2.x on the same port (an upgrade under a running daemon):
// it finds the new generation when its event stream comes back, forgets
// the directories the old process had, and drives 2.x's API from then on,
// without a restart of the daemon.
func TestWatchFollowsUpgradeFrom1To2(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	const password = "upgrade-secret-pw"
	v1 := fakeopencode.New(map[string]fakeopencode.Spec{"docs": {Status: "failed"}})
	v1.Password = password
	v1.SetHeartbeat(5 * time.Second)
	sw := &switcher{h: v1}
	srv := serveHTTP(t, sw)
	logs := &ochost.Buffer{}
	cmd := exec.Command(reconnectBin, "watch", "--url", srv.URL, "--status-addr", "127.0.0.1:0", "--log-level", "debug")
	cmd.Env = append(v2Env(t.TempDir(), t.TempDir()), "OPENCODE_SERVER_PASSWORD="+password)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if strings.Contains(logs.String(), password) {
			t.Error("the password reached the watcher's output")
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for v1.Subscribers() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("watch never subscribed to 1.x:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	v1.Publish("/p old", "session.updated", nil)
	deadline = time.Now().Add(10 * time.Second)
	for v1.Count("/mcp", "/p old", "") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no 1.x status read:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}

	v2 := fake2.New(map[string]fakeopencode.Spec{"docs": {Status: "failed"}})
	v2.SetPassword(password)
	sw.set(v2)
	srv.CloseClientConnections() // the old process is gone
	deadline = time.Now().Add(60 * time.Second)
	for v2.Subscribers() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not follow the upgrade to 2.x:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	if n := v2.Count(fake2.RouteMCP, "/p old", ""); n != 0 {
		t.Fatalf("the new 2.x process got %d reads for a directory of the old one:\n%s", n, logs)
	}
	v2.Boot("/p new") // a session runs there: its location is booted
	v2.Publish("/p new", "session.execution.started", map[string]any{"sessionID": "ses_1"})
	waitStatusRead(t, v2, "/p new", logs)
	deadline = time.Now().Add(15 * time.Second)
	for v2.Count(fake2.RouteConnect, "/p new", "docs") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no 2.x connect of the failed server:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "generation=2.x") {
		t.Fatalf("the log does not say it found 2.x:\n%s", logs)
	}
}

// The installed `watch` (no flags, started at login before OpenCode 2's
// service) follows a service that starts after it, and one that goes away
// (its service.json removed at a clean exit) and comes back, here on
// another port and release channel (service-beta.json). Meanwhile it is
// registered as following the service file, so `run` starts no second
// daemon, and it looks at most every few seconds (one attempt a stat of
// the file and one refused loopback connection).
func TestWatchFollowsAServiceThatStartsLater(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	state, config := t.TempDir(), t.TempDir()
	file := filepath.Join(state, "opencode", "service.json")
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
		for _, secret := range []string{"late-secret-pw", "beta-secret-pw"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the service password %q reached the watcher's output", secret)
			}
		}
	}()
	reg := &registry.Registry{Dir: filepath.Join(state, "mcp-reconnect", "daemons")}
	deadline := time.Now().Add(20 * time.Second)
	for ok, _ := daemonServiceWatched(reg, file); !ok; ok, _ = daemonServiceWatched(reg, file) {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not register as following %s:\n%s", file, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // no service yet: the watch is waiting

	first := fake2.New(map[string]fakeopencode.Spec{"docs": {Status: "failed"}})
	first.SetPassword("late-secret-pw")
	first.SetPID(3003)
	srv1 := serveHTTP(t, first)
	writeServiceFile(t, state, srv1.URL, "late-secret-pw", 3003)
	started := time.Now()
	waitSubscribed(t, first, 20*time.Second, logs)
	t.Logf("followed the service %v after it registered", time.Since(started).Round(100*time.Millisecond))
	first.Boot("/p one") // a session runs there: its location is booted
	first.Publish("/p one", "session.execution.started", map[string]any{"sessionID": "ses_1"})
	waitStatusRead(t, first, "/p one", logs)

	// The service exits cleanly: its file goes, then the server.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	closeHTTP(srv1)
	gone := len(logs.String())
	time.Sleep(12 * time.Second)
	if n := strings.Count(logs.String()[gone:], "event stream ended"); n < 2 || n > 9 {
		t.Errorf("%d attempts in the 12 s without a service, want a few (every ≤ 5 s):\n%s", n, logs.String()[gone:])
	}

	second := fake2.New(map[string]fakeopencode.Spec{"docs": {Status: "failed"}})
	second.SetPassword("beta-secret-pw")
	second.SetPID(4004)
	srv2 := serveHTTP(t, second)
	beta := writeServiceFile(t, state, srv2.URL, "beta-secret-pw", 4004)
	if err := os.Rename(beta, filepath.Join(filepath.Dir(beta), "service-beta.json")); err != nil {
		t.Fatal(err)
	}
	started = time.Now()
	waitSubscribed(t, second, 20*time.Second, logs)
	t.Logf("followed the service back %v after it registered", time.Since(started).Round(100*time.Millisecond))
	second.Boot("/p two") // a session runs there: its location is booted
	second.Publish("/p two", "session.execution.started", map[string]any{"sessionID": "ses_2"})
	waitStatusRead(t, second, "/p two", logs)
	if n := second.Count(fake2.RouteMCP, "/p one", ""); n != 0 {
		t.Fatalf("the new service got %d reads for a directory nobody used since", n)
	}
	if ok, _ := daemonServiceWatched(reg, file); !ok {
		t.Fatalf("the daemon no longer counts as following %s", file)
	}
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
