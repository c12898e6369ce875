package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// verdaccioVersion is the npm registry the test publishes to, pinned:
// the last release that runs on Node 20 (6.9 and later need Node 22).
const verdaccioVersion = "6.8.0"

// nodeTools are node, npm and npx: required under CI (which has them for
// OpenCode), else optional.
func nodeTools(t *testing.T) (node, npm, npx string) {
	t.Helper()
	var paths []string
	for _, name := range []string{"node", "npm", "npx"} {
		p, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s missing under CI=true: %v", name, err)
			}
			t.Skipf("%s missing: %v", name, err)
		}
		paths = append(paths, p)
	}
	return paths[0], paths[1], paths[2]
}

// installVerdaccio installs the pinned verdaccio from npm, once, into
// .cache/ of the checkout (beside OpenCode's), and returns its command.
// It is installed elsewhere and moved into place, so that two runs at
// once do not share a half-installed one.
func installVerdaccio(t *testing.T, ctx context.Context, npm string) string {
	t.Helper()
	cache := filepath.Join(repoRoot(t), ".cache")
	dir := filepath.Join(cache, "verdaccio-"+verdaccioVersion)
	bin := filepath.Join(dir, "node_modules", "verdaccio", "bin", "verdaccio")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(cache, ".verdaccio-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error", "verdaccio@"+verdaccioVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("installing verdaccio %s: %v\n%s", verdaccioVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(bin); statErr != nil {
			t.Fatal(err)
		}
	}
	t.Logf("installed verdaccio %s into %s in %v", verdaccioVersion, dir, time.Since(start).Round(time.Second))
	return bin
}

// registry is a verdaccio of the test's own on loopback with no uplink:
// it serves what the test published and nothing else.
type registry struct {
	url  string
	root string // a directory whose path holds a space: every install, home and cache is under it
	env  []string
	npm  string
}

// cleanEnv is this process's environment without what would reach
// another registry or change what is checked: npm's settings of an outer
// npm, OpenCode's and mcp-reconnect's variables, the home and XDG
// directories (the root's instead).
func cleanEnv(root string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch u := strings.ToUpper(k); {
		case strings.HasPrefix(u, "NPM_"), strings.HasPrefix(u, "OPENCODE_"), strings.HasPrefix(u, "MCP_RECONNECT_"),
			strings.HasPrefix(u, "XDG_"), u == "HOME", u == "NODE_OPTIONS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+filepath.Join(root, "home"), "XDG_CONFIG_HOME="+filepath.Join(root, "config"),
		"XDG_STATE_HOME="+filepath.Join(root, "state"), "XDG_CACHE_HOME="+filepath.Join(root, "cache"))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startRegistry starts verdaccio on a free loopback port, makes a user
// and writes an npm configuration that publishes and installs there.
func startRegistry(t *testing.T, ctx context.Context, node, verdaccio, npm string) *registry {
	t.Helper()
	root := filepath.Join(t.TempDir(), "npm test root")
	for _, d := range []string{"home", "config", "state", "cache", "storage"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	config := fmt.Sprintf(`storage: %q
auth:
  htpasswd:
    file: %q
# No uplinks, and no package proxies to one: nothing goes beyond loopback.
uplinks: {}
packages:
  '@*/*':
    access: $all
    publish: $authenticated
  '**':
    access: $all
    publish: $authenticated
web:
  enable: false
max_body_size: 200mb
log: { type: stdout, format: pretty, level: warn }
`, filepath.Join(root, "storage"), filepath.Join(root, "htpasswd"))
	cfg := filepath.Join(root, "verdaccio.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, verdaccio, "--config", cfg, "--listen", addr)
	cmd.Env = cleanEnv(root)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("verdaccio:\n%s", logs.String())
		}
	})
	url := "http://" + addr
	waitHTTP(t, ctx, url+"/-/ping", 60*time.Second, &logs)
	body, _ := json.Marshal(map[string]string{"name": "release-test", "password": "release-test-password"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url+"/-/user/org.couchdb.user:release-test", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var user struct{ Token string }
	err = json.NewDecoder(resp.Body).Decode(&user)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || user.Token == "" {
		t.Fatalf("creating a user: %s %v", resp.Status, err)
	}
	npmrc := filepath.Join(root, "npmrc")
	if err := os.WriteFile(npmrc, []byte("registry="+url+"/\n//"+addr+"/:_authToken="+user.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(cleanEnv(root), "npm_config_userconfig="+npmrc, "npm_config_globalconfig="+filepath.Join(root, "npmrc-global"),
		"npm_config_cache="+filepath.Join(root, "npm-cache"), "npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false")
	return &registry{url: url, root: root, env: env, npm: npm}
}

// waitHTTP waits for url to answer 200.
func waitHTTP(t *testing.T, ctx context.Context, url string, timeout time.Duration, logs fmt.Stringer) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s did not answer 200 within %v: %v\n%s", url, timeout, err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run runs npm (or npx) with the registry's environment plus extra.
func (r *registry) run(ctx context.Context, extra []string, command string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, command, args...)
	cmd.Env = append(append([]string(nil), r.env...), extra...)
	cmd.Dir = r.root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// npmInstall installs mcp-reconnect globally into prefix (under the
// root) and returns its command.
func (r *registry) npmInstall(t *testing.T, ctx context.Context, prefix string, flags ...string) string {
	t.Helper()
	args := append([]string{"install", "--global", "--prefix", prefix}, flags...)
	if out, err := r.run(ctx, nil, r.npm, append(args, "mcp-reconnect")...); err != nil {
		t.Fatalf("npm %s mcp-reconnect: %v\n%s", strings.Join(args, " "), err, out)
	}
	return filepath.Join(prefix, "bin", "mcp-reconnect")
}

// platformPackages are the @mcp-reconnect packages npm installed beside
// mcp-reconnect in prefix.
func platformPackages(t *testing.T, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(prefix, "lib", "node_modules", "mcp-reconnect", "node_modules", "@mcp-reconnect"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// The npm packages of the release, published to a registry of the
// test's own on loopback (verdaccio with no uplink: the test installs
// only our packages from it, and a package it does not hold is not
// found), installed by npm as users install them and run. All paths hold
// a space.
func TestNPMInstall(t *testing.T) {
	dir := distDir(t)
	node, npm, npx := nodeTools(t)
	host := hostTarget(t)
	st := hostStamp(t, dir)
	sums := readSums(t, dir)
	start := time.Now()
	defer func() { t.Logf("TestNPMInstall took %v", time.Since(start).Round(100*time.Millisecond)) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := startRegistry(t, ctx, node, installVerdaccio(t, ctx, npm), npm)
	t.Logf("verdaccio %s at %s ready after %v", verdaccioVersion, r.url, time.Since(start).Round(100*time.Millisecond))

	// Platform packages first, then the one that names them. npm wants a
	// tag for a pre-release; latest is what `npm install mcp-reconnect` takes.
	var tarballs []string
	for _, tg := range targets {
		tarballs = append(tarballs, npmAsset(tg.goos, tg.goarch))
	}
	for _, tb := range append(tarballs, npmMainAsset) {
		if out, err := r.run(ctx, nil, npm, "publish", "--tag", "latest", filepath.Join(dir, tb)); err != nil {
			t.Fatalf("npm publish %s: %v\n%s", tb, err, out)
		}
	}
	resp, err := http.Get(r.url + "/left-pad")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the registry answers %s for a package only the public registry has: it must not proxy", resp.Status)
	}

	hostBin := filepath.Join(dir, assetName(targets[host].goos, targets[host].goarch))
	hostPlat := npmPlatform(targets[host].goos, targets[host].goarch)
	prefix := filepath.Join(r.root, "global prefix")
	var command string
	t.Run("GlobalInstall", func(t *testing.T) {
		command = r.npmInstall(t, ctx, prefix)
		if got := platformPackages(t, prefix); fmt.Sprint(got) != fmt.Sprint([]string{hostPlat}) {
			t.Errorf("npm installed %v, want only this machine's %s", got, hostPlat)
		}
		installed := filepath.Join(prefix, "lib", "node_modules", "mcp-reconnect", "node_modules", "@mcp-reconnect", hostPlat, "bin", "mcp-reconnect")
		if got := sha(t, installed); got != sums[assetName(targets[host].goos, targets[host].goarch)] {
			t.Errorf("the installed binary has sha256 %s, not the release binary's", got)
		}
		// The command behaves as the binary: output, streams, exit code.
		for _, args := range [][]string{{"version"}, {"--help"}, {"no-such-command"}, {"watch", "--no-such-flag"}, {"status"}} {
			want := runCapture(t, r.env, "", hostBin, args...)
			if got := runCapture(t, r.env, "", command, args...); got != want {
				t.Errorf("mcp-reconnect %v through npm's command:\n%s\nthe binary:\n%s", args, got, want)
			}
		}
		if got := runCapture(t, r.env, "", command, "version"); !strings.HasPrefix(got, "exit 0\nstdout:\nmcp-reconnect "+st.version+"\n") {
			t.Errorf("version through npm's command:\n%s", got)
		}
		// Standard input reaches a command that run starts.
		script := `read l; echo "got<$l>"; echo to-stderr >&2; exit 3`
		got := runCapture(t, r.env, "hello\n", command, "run", "--log-file", filepath.Join(r.root, "run.log"), "--status-addr", freeAddr(t), "--", "sh", "-c", script)
		if got != "exit 3\nstdout:\ngot<hello>\nstderr:\nto-stderr\n" {
			t.Errorf("run -- sh through npm's command:\n%s", got)
		}
	})
	if command == "" {
		t.FailNow()
	}

	t.Run("WatchStopsOnSignals", func(t *testing.T) {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			w := startWatch(t, ctx, r, command, false)
			binary := w.binaryPID(t)
			_ = w.cmd.Process.Signal(sig)
			w.wantExit(t, 0)
			w.wantStopped(t, binary)
		}
		// Killed as the binary is killed.
		w := startWatch(t, ctx, r, command, false)
		_ = syscall.Kill(w.binaryPID(t), syscall.SIGKILL)
		if ws := w.wait(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the binary killed by SIGKILL: npm's command %s, want killed by SIGKILL", how(ws))
		}
	})

	t.Run("SIGTERMDuringRun", func(t *testing.T) {
		// SIGTERM to npm's command reaches run, which passes it to its
		// child; the child's exit code comes back through both.
		script := `trap 'echo got-TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done`
		cmd := exec.Command(command, "run", "--log-file", filepath.Join(r.root, "run-term.log"), "--status-addr", freeAddr(t), "--", "sh", "-c", script)
		cmd.Env = r.env
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = time.Second
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), "ready") {
			if time.Now().After(deadline) {
				t.Fatalf("the child never started:\n%s", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		below := descendants(cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("still running 30s after SIGTERM:\n%s", out.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 7 || !strings.Contains(out.String(), "got-TERM") {
			t.Errorf("run stopped with SIGTERM: %v (exit %d), want the child's exit 7:\n%s", err, code, out.String())
		}
		time.Sleep(100 * time.Millisecond) // an orphan's last exit
		for _, p := range below {
			if running(p) {
				t.Errorf("process %d (below npm's command) still runs", p)
			}
		}
	})

	t.Run("Terminal", func(t *testing.T) {
		// A TUI through run: the terminal is the child's.
		script := `test -t 0 && test -t 1 && echo tty-ok; stty size; read l; echo "got<$l>"; exit 5`
		p := startPTY(t, r.env, command, "run", "--log-file", filepath.Join(r.root, "tui.log"), "--status-addr", freeAddr(t), "--", "sh", "-c", script)
		p.waitScreen(t, "30 100")
		_, _ = p.tty.Write([]byte("hello\r"))
		p.waitScreen(t, "got<hello>")
		if code := p.wait(t); code != 5 || !strings.Contains(p.screen.String(), "tty-ok") {
			t.Errorf("exit %d, want 5; screen:\n%s", code, p.screen.String())
		}
		// Ctrl-C at the terminal stops watch: exit 0, having watched.
		w := startWatch(t, ctx, r, command, true)
		binary := w.binaryPID(t)
		_, _ = w.tty.Write([]byte{0x03})
		w.wantExit(t, 0)
		w.wantStopped(t, binary)
	})

	t.Run("KeysAreNotSentTwice", func(t *testing.T) {
		rec := recorder(t, r.root, prefix, hostPlat)
		// At a terminal, as its foreground job: Ctrl-C and Ctrl-\ reach
		// the binary from the kernel (not here: the recorder is in a
		// session of its own), and the command sends nothing more.
		p := startPTY(t, append(r.env, "REC="+rec.log), node, rec.command)
		rec.waitFor(t, "ready")
		_, _ = p.tty.Write([]byte{0x03, 0x1c})
		time.Sleep(time.Second)
		if got := rec.lines(t); fmt.Sprint(got) != "[ready]" {
			t.Errorf("the keys' signals were sent on to the binary: %v", got)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		rec.waitFor(t, "TERM")
		if code := p.wait(t); code != 0 {
			t.Errorf("exit %d after the binary exited 0 on SIGTERM", code)
		}
		// Not at a terminal: every signal sent to the command is sent
		// on, once.
		rec = recorder(t, r.root, prefix, hostPlat)
		cmd := exec.Command(node, rec.command)
		cmd.Env = append(append([]string(nil), r.env...), "REC="+rec.log)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill() }()
		rec.waitFor(t, "ready")
		want := []string{"ready"}
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTERM} {
			_ = cmd.Process.Signal(sig)
			name := strings.TrimPrefix(map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGHUP: "SIGHUP", syscall.SIGTERM: "SIGTERM"}[sig], "SIG")
			want = append(want, name)
			rec.waitFor(t, name)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("the command: %v, want exit 0 as the binary", err)
		}
		if got := rec.lines(t); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the binary got %v, want %v: each once", got, want)
		}
	})

	t.Run("Npx", func(t *testing.T) {
		// No global install on PATH, an empty npm cache: npx fetches the
		// packages from the registry itself.
		extra := []string{"npm_config_cache=" + filepath.Join(r.root, "npx cache")}
		out, err := r.run(ctx, extra, npx, "--yes", "mcp-reconnect", "version")
		if want := runCapture(t, r.env, "", hostBin, "version"); err != nil || "exit 0\nstdout:\n"+out != want {
			t.Errorf("npx mcp-reconnect version: %v\n%s\nwant\n%s", err, out, want)
		}
		// SIGTERM to npx: npm sends it on to the shell it ran the command
		// in, which dies of it; watch stops all the same, cleanly.
		w := startWatchWith(t, ctx, r, extra, npx, false, "--yes", "mcp-reconnect")
		binary := w.binaryPID(t)
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		t.Logf("npx %s", how(w.wait(t)))
		w.wantStopped(t, binary)
	})

	t.Run("OtherPlatforms", func(t *testing.T) {
		// npm's own choice by "os" and "cpu", as on each platform.
		for i, tg := range targets {
			if i == host {
				continue
			}
			plat := npmPlatform(tg.goos, tg.goarch)
			p := filepath.Join(r.root, "prefix "+plat)
			osName, cpu, _ := strings.Cut(plat, "-")
			r.npmInstall(t, ctx, p, "--os", osName, "--cpu", cpu)
			if got := platformPackages(t, p); fmt.Sprint(got) != fmt.Sprint([]string{plat}) {
				t.Errorf("npm on %s installed %v", plat, got)
			}
			b := filepath.Join(p, "lib", "node_modules", "mcp-reconnect", "node_modules", "@mcp-reconnect", plat, "bin", "mcp-reconnect")
			if got := sha(t, b); got != sums[assetName(tg.goos, tg.goarch)] {
				t.Errorf("%s: the binary has sha256 %s, not %s's", plat, got, assetName(tg.goos, tg.goarch))
			}
		}
	})

	t.Run("UnsupportedPlatform", func(t *testing.T) {
		// npm run as on a 32-bit x86 Linux: mcp-reconnect's own "cpu"
		// refuses it, and nothing is installed.
		preload := filepath.Join(t.TempDir(), "ia32.cjs")
		if err := os.WriteFile(preload, []byte(`Object.defineProperty(process, "arch", { value: "ia32" })`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(r.root, "prefix ia32")
		out, err := r.run(ctx, []string{"NODE_OPTIONS=--require " + preload}, npm, "install", "--global", "--prefix", p, "mcp-reconnect")
		if err == nil || !strings.Contains(out, "EBADPLATFORM") || !strings.Contains(out, `"cpu":"arm64,x64"`) {
			t.Errorf("npm install on linux ia32: %v\n%s\nwant EBADPLATFORM naming the CPUs there are binaries for", err, out)
		}
		if _, err := os.Stat(filepath.Join(p, "bin", "mcp-reconnect")); !os.IsNotExist(err) {
			t.Errorf("a command was installed all the same (%v)", err)
		}
	})

	t.Run("IgnoreScripts", func(t *testing.T) {
		// Nothing runs at install time, so --ignore-scripts changes
		// nothing.
		p := filepath.Join(r.root, "prefix no scripts")
		c := r.npmInstall(t, ctx, p, "--ignore-scripts")
		if got := runCapture(t, r.env, "", c, "version"); !strings.HasPrefix(got, "exit 0\nstdout:\nmcp-reconnect "+st.version+"\n") {
			t.Errorf("version after --ignore-scripts:\n%s", got)
		}
		// Without the platform package (optional dependencies left out),
		// the command says what is missing and how to get it.
		if err := os.RemoveAll(filepath.Join(p, "lib", "node_modules", "mcp-reconnect", "node_modules", "@mcp-reconnect", hostPlat)); err != nil {
			t.Fatal(err)
		}
		got := runCapture(t, r.env, "", c, "version")
		if !strings.HasPrefix(got, "exit 1\n") || !strings.Contains(got, "@mcp-reconnect/"+hostPlat) || !strings.Contains(got, "npm install -g mcp-reconnect") {
			t.Errorf("without the platform package:\n%s", got)
		}
	})
}

// runCapture runs a command with env and stdin and says how it ended:
// its exit code, stdout and stderr.
func runCapture(t *testing.T, env []string, stdin, command string, args ...string) string {
	t.Helper()
	cmd := exec.Command(command, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %v: %v", command, args, err)
	}
	s := fmt.Sprintf("exit %d\nstdout:\n%s", cmd.ProcessState.ExitCode(), stdout.String())
	if stderr.Len() > 0 {
		s += "stderr:\n" + stderr.String()
	}
	return s
}

// watch is a `mcp-reconnect watch` of a fake OpenCode, started through
// npm's command.
type watch struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	tty    *os.File // the terminal it runs at, or nil
	state  string   // $XDG_STATE_HOME
	status string
	done   chan struct{}
}

func startWatch(t *testing.T, ctx context.Context, r *registry, command string, terminal bool) *watch {
	t.Helper()
	return startWatchWith(t, ctx, r, nil, command, terminal)
}

// startWatchWith runs `command [pre...] watch --url FAKE --status-addr
// ADDR` with a state directory of its own, in a session of its own (at a
// terminal of its own when terminal is set), until GET /readyz answers.
func startWatchWith(t *testing.T, ctx context.Context, r *registry, extra []string, command string, terminal bool, pre ...string) *watch {
	t.Helper()
	fake := fakeopencode.New(map[string]fakeopencode.Spec{"docs": {}})
	fake.SetHeartbeat(time.Second)
	oc := httptest.NewServer(fake)
	t.Cleanup(func() {
		oc.CloseClientConnections()
		oc.Close()
	})
	w := &watch{logs: &syncBuffer{}, state: filepath.Join(t.TempDir(), "state"), status: freeAddr(t), done: make(chan struct{})}
	args := append(append([]string(nil), pre...), "watch", "--url", oc.URL, "--status-addr", w.status)
	w.cmd = exec.Command(command, args...)
	w.cmd.Env = append(append(append([]string(nil), r.env...), extra...), "XDG_STATE_HOME="+w.state)
	w.cmd.Dir = r.root
	var err error
	if terminal {
		w.tty, err = pty.StartWithSize(w.cmd, &pty.Winsize{Rows: 30, Cols: 100})
		if err == nil {
			go func() { _, _ = io.Copy(w.logs, w.tty) }()
		}
	} else {
		w.cmd.Stdout, w.cmd.Stderr = w.logs, w.logs
		// Its exit is what is waited for, not the end of its output,
		// which a process it leaves behind would hold open.
		w.cmd.WaitDelay = time.Second
		w.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = w.cmd.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
		if w.tty != nil {
			w.tty.Close()
		}
		if t.Failed() {
			t.Logf("%s %v:\n%s", command, args, w.logs.String())
		}
	})
	waitHTTP(t, ctx, "http://"+w.status+"/readyz", 60*time.Second, w.logs)
	return w
}

// binaryPID is the release binary's process below the command.
func (w *watch) binaryPID(t *testing.T) int {
	t.Helper()
	for _, pid := range descendants(w.cmd.Process.Pid) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && filepath.Base(exe) == "mcp-reconnect" {
			return pid
		}
	}
	t.Fatalf("no mcp-reconnect binary below pid %d", w.cmd.Process.Pid)
	return 0
}

func (w *watch) wait(t *testing.T) syscall.WaitStatus {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after being stopped:\n%s", w.logs.String())
	}
	return w.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// wantExit waits for the command to exit with code, not killed.
func (w *watch) wantExit(t *testing.T, code int) {
	t.Helper()
	if ws := w.wait(t); ws.Signaled() || ws.ExitStatus() != code {
		t.Errorf("the command %s, want exit %d:\n%s", how(ws), code, w.logs.String())
	}
}

// wantStopped checks that watch ran (it logged watching the fake) and
// stopped cleanly: the binary is gone and took itself out of the
// registry of running daemons.
func (w *watch) wantStopped(t *testing.T, binary int) {
	t.Helper()
	if !strings.Contains(w.logs.String(), "watching opencode") {
		t.Errorf("watch never logged watching the fake OpenCode:\n%s", w.logs.String())
	}
	deadline := time.Now().Add(15 * time.Second)
	for running(binary) {
		if time.Now().After(deadline) {
			t.Fatalf("the binary (pid %d) still runs 15s after the command was stopped", binary)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ents, _ := os.ReadDir(filepath.Join(w.state, "mcp-reconnect", "daemons"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("the daemon left %s in the registry: it did not stop cleanly", e.Name())
		}
	}
}

// how says how a process ended.
func how(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited %d", ws.ExitStatus())
}

// running says whether pid is a process that has not exited (a zombie
// has).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// descendants are the processes below pid, read from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// ptyRun is a command at a terminal of its own, its foreground job.
type ptyRun struct {
	cmd    *exec.Cmd
	tty    *os.File
	screen *syncBuffer
	done   chan struct{}
}

func startPTY(t *testing.T, env []string, command string, args ...string) *ptyRun {
	t.Helper()
	p := &ptyRun{cmd: exec.Command(command, args...), screen: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(append([]string(nil), env...), "TERM=xterm-256color")
	var err error
	if p.tty, err = pty.StartWithSize(p.cmd, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(p.screen, p.tty) }()
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.tty.Close()
		if t.Failed() {
			t.Logf("screen of %s %v:\n%s", command, args, p.screen.String())
		}
	})
	return p
}

func (p *ptyRun) waitScreen(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.screen.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the screen lacks %q:\n%s", s, p.screen.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *ptyRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("still running after 30s:\n%s", p.screen.String())
		return -1
	}
}

// signalRecorder is the installed mcp-reconnect package (its command as
// npm installed it) beside a stand-in platform package whose "binary"
// writes each signal it gets to a file. It puts itself in a session of its
// own, so the only signals it gets are those the command sends on.
type signalRecorder struct {
	command string // the package's command, for node
	log     string
}

func recorder(t *testing.T, root, prefix, plat string) signalRecorder {
	t.Helper()
	dir, err := os.MkdirTemp(root, "recorder ")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(prefix, "lib", "node_modules", "mcp-reconnect")
	modules := filepath.Join(dir, "node_modules")
	for _, f := range []string{"package.json", "bin/mcp-reconnect.cjs", "lib/binary.cjs"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(modules, "mcp-reconnect", f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(modules, "mcp-reconnect", f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(modules, "@mcp-reconnect", plat, "bin", "mcp-reconnect")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
exec setsid sh -c 'echo $$ >"$REC.pid"
for s in INT QUIT HUP; do trap "echo $s >>\"\$REC\"" $s; done
trap "echo TERM >>\"\$REC\"; exit 0" TERM
echo ready >>"$REC"
while :; do sleep 0.05; done'
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := signalRecorder{command: filepath.Join(modules, "mcp-reconnect", "bin", "mcp-reconnect.cjs"), log: filepath.Join(dir, "signals")}
	t.Cleanup(func() {
		// In a session of its own, it outlives a command killed at the
		// end of a failed test.
		if b, err := os.ReadFile(rec.log + ".pid"); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	return rec
}

func (r signalRecorder) lines(t *testing.T) []string {
	t.Helper()
	b, _ := os.ReadFile(r.log)
	return strings.Fields(string(b))
}

func (r signalRecorder) waitFor(t *testing.T, line string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, l := range r.lines(t) {
			if l == line {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binary never recorded %s: %v", line, r.lines(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and readers at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
