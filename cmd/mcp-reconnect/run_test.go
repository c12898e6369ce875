package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// fakeOpenCode2 writes an "opencode" that says 2.0.21 to --version and
// otherwise runs this test binary as TestHelperOpenCode2 on the --port it
// is given (or 4096 with none), for life; it records in dir/env whether
// OPENCODE_PASSWORD was set.
func fakeOpenCode2(t *testing.T, life time.Duration) (script, dir string) {
	t.Helper()
	dir = t.TempDir()
	script = filepath.Join(dir, "opencode")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	body := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 2.0.21; exit 0; fi\n" +
		"HELPER_PORT=4096\nwhile [ $# -gt 0 ]; do case \"$1\" in --port) HELPER_PORT=$2; shift;; esac; shift; done\n" +
		"export HELPER_PORT HELPER_OPENCODE2=1 HELPER_DIR=" + dir + " HELPER_LIFE=" + life.String() + "\n" +
		"exec " + exe + " -test.run='^TestHelperOpenCode2$' -test.count=1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, dir
}

// TestHelperOpenCode2 is a foreground OpenCode 2 server (the 2.x fake)
// with 2.x's password rules: OPENCODE_PASSWORD, else
// OPENCODE_SERVER_PASSWORD; user "opencode".
func TestHelperOpenCode2(t *testing.T) {
	if os.Getenv("HELPER_OPENCODE2") == "" {
		t.Skip("helper process only")
	}
	dir := os.Getenv("HELPER_DIR")
	pw, given := os.LookupEnv("OPENCODE_PASSWORD")
	if !given {
		pw = os.Getenv("OPENCODE_SERVER_PASSWORD")
	}
	_ = os.WriteFile(filepath.Join(dir, "env"), fmt.Appendf(nil, "OPENCODE_PASSWORD given: %v\n", given), 0o600)
	l, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("HELPER_PORT"))
	if err != nil {
		os.Exit(3)
	}
	f := fake2.New(map[string]fakeopencode.Spec{"docs": {Status: "failed"}})
	f.SetPassword(pw)
	f.SetPID(os.Getpid())
	go func() { _ = http.Serve(l, f) }()
	life, _ := time.ParseDuration(os.Getenv("HELPER_LIFE"))
	time.Sleep(life)
	os.Exit(0)
}

// On OpenCode 2, `run -- opencode serve --port P` (or without a port,
// then the wrapper's) is a server of its own, as on 1.x: run supervises it,
// gives it its password in OPENCODE_PASSWORD, waits until it answers as
// OpenCode 2, and watches it (a registry entry for its URL while it
// runs); it is not the background service, and no service daemon is
// started for it.
func TestRunOnOpenCode2ServeWatchesTheServerItStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcp-reconnect")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"serve", "--port", ""}, {"serve"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			home := t.TempDir()
			state := filepath.Join(home, "state")
			script, dir := fakeOpenCode2(t, 4*time.Second)
			if args[len(args)-1] == "" {
				port, err := loopback.FreePort()
				if err != nil {
					t.Fatal(err)
				}
				args[len(args)-1] = fmt.Sprint(port)
			}
			logFile := filepath.Join(dir, "run.log")
			var out bytes.Buffer
			cmd := exec.Command(bin, append([]string{"run", "--log-level", "debug", "--log-file", logFile, "--status-addr", "127.0.0.1:0", "--", script}, args...)...)
			cmd.Env = append(cleanEnv(), "PATH="+os.Getenv("PATH"), "HOME="+home, "XDG_STATE_HOME="+state,
				"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			reg := &registry.Registry{Dir: filepath.Join(state, "mcp-reconnect", "daemons")}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-done
				ents, _ := reg.List()
				for _, e := range ents {
					_ = syscall.Kill(e.PID, syscall.SIGTERM) // a service daemon, if one was started
				}
			})
			var watching registry.Entry
			service := ""
			deadline := time.Now().Add(4 * time.Second)
			for watching.PID == 0 && time.Now().Before(deadline) {
				ents, _ := reg.List()
				for _, e := range ents {
					if e.Service != "" {
						service = e.Service
					}
					if e.PID == cmd.Process.Pid {
						watching = e
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("run did not end with its child")
			}
			log, _ := os.ReadFile(logFile)
			if service != "" {
				t.Errorf("a daemon follows the background service (%s) for a serve of its own", service)
			}
			if watching.PID == 0 {
				t.Fatalf("run watched no server of its own (exit %d); output:\n%s\nlog:\n%s", cmd.ProcessState.ExitCode(), out.String(), log)
			}
			if port := args[len(args)-1]; len(args) > 1 && !watching.Watches("http://127.0.0.1:"+port) {
				t.Errorf("the daemon watches %v, want http://127.0.0.1:%s", watching.URLs, port)
			}
			if !strings.Contains(string(log), "generation=2.x") {
				t.Errorf("the log does not say it watched OpenCode 2:\n%s", log)
			}
			env, _ := os.ReadFile(filepath.Join(dir, "env"))
			if !strings.Contains(string(env), "OPENCODE_PASSWORD given: true") {
				t.Errorf("the child was not given OPENCODE_PASSWORD: %s", env)
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit %d, want the child's 0; output:\n%s", code, out.String())
			}
		})
	}
}

// cleanEnv is the test's environment without OpenCode's, the daemon's or
// the user's directories.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPENCODE_") || strings.HasPrefix(k, "MCP_RECONNECT_") || strings.HasPrefix(k, "XDG_") || k == "HOME" || k == "PATH" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// run --directory D on an OpenCode 2 TUI: the service's daemon, shared
// by every TUI and started with no directory, is asked to arm D (with its
// token, at the address the registry gives).
func TestRunV2ArmsItsDirectoriesInTheServiceWatch(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req statusapi.ReconnectRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+req.Directory)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"results":[]}`)
	}))
	defer srv.Close()
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	file := "/state/opencode/service.json"
	addr := strings.TrimPrefix(srv.URL, "http://")
	if _, err := reg.Register(registry.Entry{PID: os.Getpid(), URLs: []string{"http://127.0.0.1:49374"}, Service: file, StatusAddr: addr, Token: "tok"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := armInServiceWatch(context.Background(), reg, file, []string{physical(t, dir)}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	physical, _ := filepath.EvalSymlinks(dir)
	if len(got) != 1 || got[0] != "POST /reconnect Bearer tok "+physical {
		t.Fatalf("requests to the service's daemon: %q", got)
	}
}

// On OpenCode 2 every command that attaches to the background service
// (and starts it when none runs: mcp list, run, session, …) leaves the
// service watched, as the TUI does: run starts one daemon following the
// service file, then becomes the command, its arguments untouched. Two
// such commands at once start one daemon between them; a command that
// starts no service (service stop, --help) or runs a private server
// (--standalone) starts none, and gets no --port.
func TestRunOnOpenCode2CommandsLeaveTheServiceWatched(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcp-reconnect")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "opencode")
	body := "#!/bin/sh\ncase \"$1\" in --version) echo 'opencode v2.1.2'; exit 0;; esac\n" +
		"echo \"$*\" >> " + filepath.Join(dir, "args") + "\nexit 7\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	state := filepath.Join(home, "state")
	env := append(cleanEnv(), "PATH="+os.Getenv("PATH"), "HOME="+home, "XDG_STATE_HOME="+state,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	reg := &registry.Registry{Dir: filepath.Join(state, "mcp-reconnect", "daemons")}
	daemons := func() []registry.Entry {
		ents, _ := reg.List()
		return ents
	}
	t.Cleanup(func() {
		for _, e := range daemons() {
			_ = syscall.Kill(e.PID, syscall.SIGTERM)
		}
	})
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"run", "--log-file", filepath.Join(dir, "run.log"), "--", script}, args...)...)
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 7 {
			t.Fatalf("run -- opencode %v: exit %d, want the command's 7:\n%s", args, code, out)
		}
	}
	ran := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "args"))
		_ = os.Remove(filepath.Join(dir, "args"))
		return string(b)
	}

	for _, args := range [][]string{{"service", "stop"}, {"--help"}, {"mcp", "--help"}, {"--standalone"}, {"run", "--standalone", "hi"}, {"upgrade"}} {
		run(args...)
		if got, want := ran(), strings.Join(args, " ")+"\n"; got != want {
			t.Errorf("run -- opencode %v ran %q, want %q", args, got, want)
		}
		if d := daemons(); len(d) != 0 {
			t.Fatalf("run -- opencode %v started a daemon: %+v", args, d)
		}
	}

	run("mcp", "list")
	if got := ran(); got != "mcp list\n" {
		t.Errorf("ran %q", got)
	}
	file := filepath.Join(state, "opencode", "service.json")
	if d := daemons(); len(d) != 1 || d[0].Service != file {
		t.Fatalf("after mcp list, daemons %+v; want one following %s", d, file)
	}
	first := daemons()[0].PID

	var wg sync.WaitGroup
	for _, args := range [][]string{{"run", "hello"}, {"session", "list"}, {"api", "GET", "/api/info"}} {
		wg.Go(func() { run(args...) })
	}
	wg.Wait()
	if d := daemons(); len(d) != 1 || d[0].PID != first {
		t.Fatalf("after three more commands, daemons %+v; want the one that follows the service (pid %d)", d, first)
	}
	if got := strings.Count(ran(), "\n"); got != 3 {
		t.Errorf("%d commands ran, want 3", got)
	}
}

// On a 1.x release later than 1.18 (a fake 1.19.0), a subcommand 1.18
// lacks ("share") is passed through untouched, at once: no --port, no
// wait for a server that never comes. A bare word that names a folder
// ("shop") is the TUI's project and gets its port; a subcommand 1.18 has
// stays one beside a folder of its name. The binary is asked its version
// only, never its --help.
func TestRunTellsAProjectFromALaterSubcommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcp-reconnect")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	oc := filepath.Join(dir, "bin", "opencode")
	work := filepath.Join(dir, "work")
	for _, d := range []string{filepath.Dir(oc), filepath.Join(work, "shop"), filepath.Join(work, "models")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := `#!/bin/sh
case "$1" in
--version) echo 1.19.0; exit 0;;
--help) echo help >> ` + dir + `/helped; exit 0;;
esac
echo "ARGS: $*" >> ` + dir + `/args
exit 0
`
	if err := os.WriteFile(oc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := append(cleanEnv(), "PATH="+os.Getenv("PATH"), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	runOC := func(args ...string) (string, time.Duration) {
		t.Helper()
		_ = os.Remove(filepath.Join(dir, "args"))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"run", "--log-file", filepath.Join(dir, "run.log"), "--status-addr", "127.0.0.1:0", "--start-timeout", "20s", "--", oc}, args...)...)
		cmd.Env, cmd.Dir = env, work
		start := time.Now()
		out, _ := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("run -- opencode %v did not end:\n%s", args, out)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "args"))
		return strings.TrimSpace(string(b)), time.Since(start)
	}

	if got, took := runOC("share", "ses_1"); got != "ARGS: share ses_1" || took > 15*time.Second {
		t.Fatalf("share: %q after %v; want it passed through untouched, at once", got, took)
	}
	if got, _ := runOC("shop"); !strings.HasPrefix(got, "ARGS: shop --port ") {
		t.Fatalf("shop (a project folder): %q, want the TUI with a port", got)
	}
	if got, _ := runOC("models"); got != "ARGS: models" {
		t.Fatalf("models (beside a models folder): %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "helped")); err == nil {
		t.Fatalf("--help was asked: %q", b)
	}
}

// v2Wrapper builds the binary and a fake OpenCode 2 ("opencode" that says
// 2.1.2 and exits 0) in a home of its own, and returns a runner of
// `mcp-reconnect run FLAGS -- opencode mcp list` there, the registry,
// and the home. The daemons run starts are stopped at the end.
func v2Wrapper(t *testing.T) (run func(flags ...string) string, reg *registry.Registry, home string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcp-reconnect")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "opencode")
	body := "#!/bin/sh\ncase \"$1\" in --version) echo 'opencode v2.1.2'; exit 0;; esac\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	home = t.TempDir()
	state := filepath.Join(home, "state")
	env := append(cleanEnv(), "PATH="+os.Getenv("PATH"), "HOME="+home, "XDG_STATE_HOME="+state,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	reg = &registry.Registry{Dir: filepath.Join(state, "mcp-reconnect", "daemons")}
	t.Cleanup(func() {
		ents, _ := reg.List()
		for _, e := range ents {
			_ = syscall.Kill(e.PID, syscall.SIGTERM) // the daemon run started for this test
		}
	})
	return func(flags ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(append([]string{"run", "--log-file", filepath.Join(dir, "run.log")}, flags...), "--", script, "mcp", "list")...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out)
		}
		return string(out)
	}, reg, home
}

// The flags run shares with watch that say how the daemon works
// (--slow-interval, --probe, --max-delay, …) are the user's settings for
// the daemon that keeps their OpenCode's servers connected: on OpenCode
// 2, the daemon run starts for the background service runs with those
// typed for run.
func TestRunPassesItsDaemonFlagsToTheServiceDaemonItStarts(t *testing.T) {
	run, reg, _ := v2Wrapper(t)
	run("--slow-interval", "0", "--probe=false", "--max-delay", "10s")
	ents, _ := reg.List()
	if len(ents) != 1 {
		t.Fatalf("daemons %+v, want the one run started", ents)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(ents[0].PID) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	for _, want := range []string{"--slow-interval=0s", "--probe=false", "--max-delay=10s"} {
		if !slices.Contains(args, want) {
			t.Errorf("run was given %s; the service's daemon it started runs as %q", want, args)
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--initial-delay") }) {
		t.Errorf("a daemon flag run was not given reached the daemon: %q", args)
	}
}

// run --directory D on OpenCode 2, with no daemon running, starts one for
// the background service; with the config file's [[opencode]] tables it
// watches their servers too. D is the service's: it is kept there, and
// never armed in a table's OpenCode, which would boot an instance for D
// and start D's MCP servers where nobody uses D (rules 3 and 13).
func TestRunDirectoryIsArmedInTheServiceOnly(t *testing.T) {
	other := fakeopencode.New(map[string]fakeopencode.Spec{"s": {}})
	other.Password = "other-pw"
	hs := httptest.NewServer(other)
	t.Cleanup(hs.Close) // after the daemon stops: it holds an event stream
	run, reg, home := v2Wrapper(t)
	pw := filepath.Join(home, "other.pw")
	if err := os.WriteFile(pw, []byte("other-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, "config", "mcp-reconnect", "config.toml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("[[opencode]]\nurl = \""+hs.URL+"\"\npassword-file = \""+pw+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := physical(t, t.TempDir())
	if out := run("--directory", d); out != "" {
		t.Errorf("run said: %s", out)
	}
	ents, _ := reg.List()
	if len(ents) != 1 {
		t.Fatalf("daemons %+v, want the one run started", ents)
	}
	// Once the table's engine runs, what it armed from the start is armed.
	c := &statusapi.Client{Addr: ents[0].StatusAddr, Token: ents[0].Token}
	var inTable, inService []string
	deadline := time.Now().Add(20 * time.Second)
	for connected := false; !connected && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		st, err := c.Status(context.Background())
		if err != nil {
			continue
		}
		inTable, inService = nil, nil
		for _, s := range st.Servers {
			for _, dir := range s.Directories {
				if s.URL == hs.URL {
					inTable = append(inTable, dir.Directory)
				} else {
					inService = append(inService, dir.Directory)
				}
			}
			connected = connected || s.URL == hs.URL && s.Stream.Connected
		}
	}
	if slices.Contains(inTable, d) || other.Count("", d, "") > 0 {
		t.Errorf("run's --directory %s, given for the OpenCode 2 service, is armed in the config file's other OpenCode %s (armed there: %q)", d, hs.URL, inTable)
	}
	if !slices.Contains(inService, d) {
		t.Errorf("run's --directory %s is not armed in the OpenCode 2 service (armed there: %q)", d, inService)
	}
}

// armingSource is one server of a daemon's status API that records what
// it was asked to arm and reconnect; file is the service file it follows.
type armingSource struct {
	idleSource
	file  string
	mu    sync.Mutex
	armed []string // "dir reason"
	asked []string
}

func (s *armingSource) ServiceFile() string { return s.file }

func (s *armingSource) Arm(dir, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = append(s.armed, dir+" "+reason)
	return nil
}

func (s *armingSource) Reconnect(dir string, _ []string) (reconnect.ReconnectResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, dir)
	return reconnect.ReconnectResult{URL: s.url, Directories: []string{dir}}, nil
}

func (s *armingSource) got() ([]string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.armed), slices.Clone(s.asked)
}

// daemonAPI serves a daemon's status API over sources, registered in reg
// as entry (StatusAddr and Token filled in).
func daemonAPI(t *testing.T, reg *registry.Registry, entry registry.Entry, sources ...statusapi.Source) {
	t.Helper()
	api := &statusapi.API{Sources: sources, Broker: statusapi.NewBroker(), Metrics: metrics.NewSet(), Version: "test", Token: "tok-0123456789"}
	hs := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		api.Broker.Close()
		hs.Close()
	})
	entry.StatusAddr, entry.Token = strings.TrimPrefix(hs.URL, "http://"), api.Token
	if _, err := reg.Register(entry); err != nil {
		t.Fatal(err)
	}
}

// The daemon started at login (zero-config watch with the config file)
// watches the [[opencode]] tables' servers and follows the OpenCode 2
// service too, which does not run yet (its URL is unknown). run
// --directory D on 2.x hands D to that daemon for the service alone:
// kept there, as if given with --directory, and in no table's server.
func TestRunDirectoryIsKeptByAServiceDaemonThatWatchesSeveralServers(t *testing.T) {
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	file := filepath.Join(t.TempDir(), "opencode", "service.json")
	table := &armingSource{idleSource: idleSource{url: "http://127.0.0.1:4096"}}
	service := &armingSource{idleSource: idleSource{url: "http://127.0.0.1:49374"}, file: file}
	daemonAPI(t, reg, registry.Entry{PID: os.Getpid(), URLs: []string{table.url, service.url}, Service: file}, table, service)

	dirs := []string{physical(t, t.TempDir())}
	err := armInServiceWatch(context.Background(), reg, file, dirs)
	armed, asked := service.got()
	if want := []string{dirs[0] + " " + reconnect.ArmedByFlag}; err != nil || !slices.Equal(armed, want) || !slices.Equal(asked, dirs) {
		t.Errorf("the OpenCode 2 service's daemon (which also watches a table's server) kept %q and reconnected %q, want %q kept (err %v)", armed, asked, want, err)
	}
	if armed, asked := table.got(); len(armed)+len(asked) > 0 {
		t.Errorf("run's --directory for the OpenCode 2 service was armed in another server the daemon watches: %q %q", armed, asked)
	}
}

// run counts the service as watched (and starts no daemon) by
// daemon.ServiceDaemon: a daemon following the same file by any
// spelling, or watching the URL the file names. That daemon, found by the
// same rule, is the one asked to keep run's --directory: one started with
// --service-file through a symlinked state directory, or a `watch --url`
// of the service's address.
func TestRunDirectoryReachesTheDaemonThatWatchesTheService(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "state")
	file := filepath.Join(state, "opencode", "service.json")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	const svcURL = "http://127.0.0.1:49374"
	if err := os.WriteFile(file, []byte(`{"id":"x","version":"2.1.2","url":"`+svcURL+`","pid":1,"password":"pw"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "state-link")
	if err := os.Symlink(state, link); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(link, "opencode", "service.json")
	for name, tc := range map[string]struct {
		entry registry.Entry
		src   *armingSource
	}{
		"--service-file through a symlink": {registry.Entry{PID: os.Getpid(), URLs: []string{svcURL}, Service: linked}, &armingSource{idleSource: idleSource{url: svcURL}, file: linked}},
		"watch --url of the service":       {registry.Entry{PID: os.Getpid(), URLs: []string{svcURL}}, &armingSource{idleSource: idleSource{url: svcURL}}},
	} {
		t.Run(name, func(t *testing.T) {
			reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
			other := &armingSource{idleSource: idleSource{url: "http://127.0.0.1:4096"}}
			daemonAPI(t, reg, tc.entry, other, tc.src)
			if _, _, ok, err := daemon.ServiceDaemon(reg, file); err != nil || !ok {
				t.Fatalf("setup: ServiceDaemon = %v, %v: run would start a daemon", ok, err)
			}
			dirs := []string{physical(t, t.TempDir())}
			err := armInServiceWatch(context.Background(), reg, file, dirs)
			if armed, _ := tc.src.got(); len(armed) == 0 || err != nil {
				t.Errorf("run found the service watched (so started no daemon) but armed its --directory nowhere (err %v)", err)
			}
		})
	}
}

// When the service's daemon cannot keep run's --directory, run says so
// on the terminal (its log is a file), and runs the command all the
// same.
func TestRunSaysOnTheTerminalWhenItsDirectoryIsNotArmed(t *testing.T) {
	run, reg, home := v2Wrapper(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this daemon watches several OpenCode servers", http.StatusBadRequest)
	}))
	defer srv.Close()
	file := filepath.Join(home, "state", "opencode", "service.json")
	// A daemon of this test's own process: not one to stop at the end.
	if _, err := reg.Register(registry.Entry{PID: os.Getpid(), Service: file, StatusAddr: strings.TrimPrefix(srv.URL, "http://"), Token: "tok"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(reg.Dir) })
	d := physical(t, t.TempDir())
	out := run("--directory", d)
	if !strings.Contains(out, "mcp-reconnect: --directory "+d+" not armed") || !strings.Contains(out, "several") {
		t.Errorf("run's --directory was refused by the service's daemon; run said %q, want the directory and the daemon's reason", out)
	}
}

// physical is dir as run hands it to the daemon (daemon.PhysicalDir).
func physical(t *testing.T, dir string) string {
	t.Helper()
	p, err := daemon.PhysicalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
