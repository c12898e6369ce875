package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
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
	armInServiceWatch(context.Background(), reg, file, physicalDirs([]string{dir}, slog.New(slog.DiscardHandler)), slog.New(slog.DiscardHandler))
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
