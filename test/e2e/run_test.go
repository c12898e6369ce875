package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// wrapper is a running `mcp-reconnect run -- …`.
type wrapper struct {
	cmd     *exec.Cmd
	out     *ochost.Buffer
	logFile string
	done    chan struct{}
}

// startRun starts `mcp-reconnect run [flags] -- command...` in a hermetic
// environment (home), from dir, with extra environment.
func startRun(t testing.TB, home, dir string, env []string, flags []string, command ...string) *wrapper {
	t.Helper()
	return startRunAs(t, nil, home, dir, env, flags, command...)
}

// startRunAs is startRun with the wrapper's process attributes: a shell
// with job control starts each job in a process group of its own
// (Setpgid), which it leads.
func startRunAs(t testing.TB, attr *syscall.SysProcAttr, home, dir string, env []string, flags []string, command ...string) *wrapper {
	t.Helper()
	w := &wrapper{out: &ochost.Buffer{}, logFile: filepath.Join(t.TempDir(), "logs", "run.log"), done: make(chan struct{})}
	args := append([]string{"run", "--log-level", "debug", "--log-file", w.logFile, "--status-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t))}, flags...)
	args = append(append(args, "--"), command...)
	w.cmd = exec.Command(reconnectBin, args...)
	w.cmd.Env = append(ochost.Env(home), env...)
	w.cmd.Dir = dir
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	w.cmd.SysProcAttr = attr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
		// Secrets never reach the wrapper's log or output.
		b, _ := os.ReadFile(w.logFile)
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); strings.Contains(k, "PASSWORD") && (strings.Contains(string(b), v) || strings.Contains(w.out.String(), v)) {
				t.Errorf("the password in %s reached the wrapper's log or output", k)
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(w.logFile)
			t.Logf("wrapper output:\n%s\nwrapper log:\n%s", w.out, b)
		}
	})
	return w
}

func (w *wrapper) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
		return exitCode(w.cmd.ProcessState)
	case <-time.After(timeout):
		t.Fatalf("wrapper still running after %v", timeout)
		return -1
	}
}

func (w *wrapper) waitLog(t testing.TB, s string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(w.logFile)
		if strings.Contains(string(b), s) {
			return string(b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(w.logFile)
	t.Fatalf("wrapper log has no %q within %v:\n%s", s, timeout, b)
	return ""
}

func hermeticHome(t testing.TB) string {
	home := t.TempDir()
	if err := ochost.SeedConfigDir(filepath.Join(home, "config", "opencode")); err != nil {
		t.Fatal(err)
	}
	return home
}

// runServe starts `run -- opencode serve --port P` of release g from a
// project with one stdio server "s", the password in the variable a user
// of g gives it in, and waits until it watches.
func runServe(t *testing.T, g gen) (*wrapper, *OpenCode, *Project, string) {
	t.Helper()
	needBinary(t, g.Bin, g.Name)
	home := g.newHome(t)
	t.Cleanup(func() { endProcessesOf(home) })
	p := g.newProject(t, nil)
	rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
	port := freePort(t)
	const password = "run-e2e-password"
	w := startRun(t, home, p.Dir, []string{g.PasswordVar + "=" + password}, nil, g.Bin, "serve", "--port", fmt.Sprint(port))
	w.waitLog(t, "watching opencode", 60*time.Second)
	oc := &OpenCode{OpenCode: &ochost.OpenCode{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port, Password: password, Gen: g.Gen}, bin: g.Bin}
	return w, oc, p, home
}

// run -- opencode serve: a crashed stdio server is recovered; the log file
// is private; SIGTERM to the wrapper reaches OpenCode, the wrapper exits
// with OpenCode's code, and no process is left behind.
func TestRunServeRecoversAndCleansUp(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		w, oc, p, home := runServe(t, g)

		n, killed := p.KillConnected(t, oc, "s")
		p.WaitStarts(t, "s", n+1, repairBound)
		oc.WaitStatus(t, p.Dir, "s", "connected", repairBound-time.Since(killed))
		t.Logf("connected again %v after the kill", time.Since(killed).Round(time.Millisecond))
		w.waitLog(t, "reconnected MCP server", 10*time.Second)

		for path, want := range map[string]os.FileMode{w.logFile: 0o600, filepath.Dir(w.logFile): 0o700 | os.ModeDir} {
			if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
				t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
			}
		}
		if strings.Contains(w.out.String(), "level=") {
			t.Errorf("the daemon logged onto the terminal:\n%s", w.out)
		}

		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		if code := w.wait(t, 15*time.Second); code != g.TermExit {
			t.Errorf("exit code after SIGTERM = %d, want %d, what opencode serve itself ends with", code, g.TermExit)
		}
		// No opencode and no MCP server of this test may survive.
		waitNoProcesses(t, p.LogDir, home)
	})
}

// repairBound is how soon after a stdio server's crash it must be
// connected again, on either generation, in every test of a repair
// through the wrapper (measured: about a second).
const repairBound = 15 * time.Second

// waitNoProcesses fails unless, within 5 s, no live process mentions the
// markers (MCP servers exit about 0.5 s after OpenCode).
func waitNoProcesses(t testing.TB, markers ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for left := processesMentioning(markers...); len(left) > 0; left = processesMentioning(markers...) {
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesMentioning lists live processes whose command line or
// environment mentions one of the markers.
func processesMentioning(markers ...string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(stat), ") Z ") {
			continue // a zombie is dead
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			for _, m := range markers {
				if m != "" && strings.Contains(string(b), m) {
					out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " ")[:min(120, len(b))])
				}
			}
		}
	}
	return out
}

// With no password configured, run generates one and gives it to
// OpenCode in the generation's variable, never on its command line: the
// server refuses a request without it and answers one with it, the
// daemon (which has it) watches the server, and the password reaches
// neither the terminal nor the log. With no --port either, run picks one.
func TestRunGeneratesPassword(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		needBinary(t, g.Bin, g.Name)
		home := g.newHome(t)
		t.Cleanup(func() { endProcessesOf(home) })
		w := startRun(t, home, home, nil, nil, g.Bin, "serve")
		log := w.waitLog(t, "generated_password=true", 60*time.Second)
		w.waitLog(t, "watching opencode", 60*time.Second)
		kids := childPIDs(w.cmd.Process.Pid)
		if len(kids) != 1 {
			t.Fatalf("wrapper children = %v, want the one opencode", kids)
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", kids[0]))
		password := environValue(kids[0], g.PasswordVar)
		if len(password) < 24 || strings.Contains(string(cmdline), password) {
			t.Fatalf("opencode's %s is %d characters, on its command line: %v", g.PasswordVar, len(password), strings.Contains(string(cmdline), password))
		}
		st := daemonStatus(t, home)
		if len(st.Servers) != 1 || !st.Servers[0].Stream.Connected || !strings.Contains(string(cmdline), fmt.Sprint(portOf(t, st.Servers[0].URL))) {
			t.Fatalf("the daemon does not watch opencode at the port run gave it (%q): %+v", cmdline, st.Servers)
		}
		url := st.Servers[0].URL + g.InfoRoute
		if code, err := httpGetAuth(url, ""); err != nil || code != 401 {
			t.Fatalf("GET %s without the password: %d %v, want 401", g.InfoRoute, code, err)
		}
		if code, err := httpGetAuth(url, password); err != nil || code != 200 {
			t.Fatalf("GET %s with the generated password: %d %v, want 200", g.InfoRoute, code, err)
		}
		if strings.Contains(log, password) || strings.Contains(w.out.String(), password) {
			t.Fatalf("the generated password reached the log or the terminal:\n%s", w.out)
		}
	})
}

// environValue is the value of variable name in process pid's
// environment ("" when unset or unreadable).
func environValue(pid int, name string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// portOf is the port of an http://host:port URL.
func portOf(t testing.TB, u string) int {
	t.Helper()
	i := strings.LastIndexByte(u, ':')
	port, err := strconv.Atoi(strings.TrimRight(u[i+1:], "/"))
	if i < 0 || err != nil {
		t.Fatalf("no port in %q", u)
	}
	return port
}

// httpGetAuth GETs url as user "opencode" with password ("": none).
func httpGetAuth(url, password string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := newRequest(ctx, url)
	if password != "" {
		req.SetBasicAuth("opencode", password)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The wrapper exits with the child's exit code: a command that is not
// OpenCode, and OpenCode itself failing (its port is taken).
func TestRunExitCodes(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.newHome(t)
		w := startRun(t, home, home, nil, nil, "sh", "-c", "exit 3")
		if code := w.wait(t, 20*time.Second); code != 3 {
			t.Fatalf("exit code = %d, want 3", code)
		}
		l, port := listenBusy(t)
		defer l()
		w = startRun(t, home, home, nil, nil, g.Bin, "serve", "--port", fmt.Sprint(port))
		if code := w.wait(t, 60*time.Second); code != 1 {
			t.Fatalf("exit code with the port taken = %d, want 1 (opencode's)", code)
		}
	})
}

// run -- opencode (the TUI) under a pseudo-terminal: it renders; the
// server it uses (1.x: its own, on the port run gives it; 2.x: the
// background service it attaches to, and starts) is watched by exactly
// one daemon; a crash inside it is recovered through that daemon; it
// quits on its own key and the wrapper exits with its code.
func TestRunTUI(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		tui := startTUI(t, g)
		p := tui.p

		// The TUI starts its directory's MCP servers at once.
		p.WaitStarts(t, "s", 1, 60*time.Second)
		st := waitWatched(t, tui.home, p, "s", 60*time.Second)
		time.Sleep(2 * time.Second) // let it render
		if tui.screen.String() == "" {
			t.Fatal("the TUI rendered nothing")
		}
		_ = pty.Setsize(tui.tty, &pty.Winsize{Rows: 30, Cols: 100}) // a resize reaches it
		tui.waitConnected(t, st)
		killed := time.Now()
		killPID(t, p.Starts(t, "s")[0])
		p.WaitStarts(t, "s", 2, repairBound)
		waitFile(t, tui.logFile, "reconnected MCP server", repairBound-time.Since(killed))
		waitDaemonShows(t, tui.home, p.Dir, "s", "connected", 10*time.Second)
		t.Logf("connected again %v after the kill", time.Since(killed).Round(time.Millisecond))

		if code := tui.quit(t); code != 0 {
			t.Fatalf("wrapper exit code = %d, want the TUI's 0", code)
		}
	})
}

// On 1.x, the TUI announces a repair on its own screen (a toast). 2.x
// has no route to show one: its repairs are announced on the daemon's
// event stream, log and metrics only.
func TestRunTUIAnnouncesTheRepairOnItsScreen(t *testing.T) {
	onlyGeneration(t, ochost.Gen1, func(t *testing.T, g gen) {
		tui := startTUI(t, g)
		p := tui.p
		p.WaitStarts(t, "s", 1, 60*time.Second)
		tui.waitConnected(t, waitWatched(t, tui.home, p, "s", 60*time.Second))
		killPID(t, p.Starts(t, "s")[0])
		p.WaitStarts(t, "s", 2, repairBound)
		deadline := time.Now().Add(repairBound)
		for !strings.Contains(tui.screen.String(), `reconnected (my projéct)`) {
			if time.Now().After(deadline) {
				t.Fatalf("no reconnect toast on the TUI's screen (%d bytes)", len(tui.screen.String()))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if code := tui.quit(t); code != 0 {
			t.Fatalf("wrapper exit code = %d, want the TUI's 0", code)
		}
	})
}

// tuiRun is `run -- opencode` in a pseudo-terminal, from a project with
// one stdio server "s".
type tuiRun struct {
	cmd     *exec.Cmd
	tty     *os.File
	screen  *ochost.Buffer
	logFile string
	home    string
	p       *Project
	gen     gen
	done    chan struct{}
}

// waitConnected waits until the TUI's OpenCode (st: the daemon's status)
// says its directory's server s is connected: a server killed while
// OpenCode still starts it (a loaded machine) is one OpenCode never
// reports.
func (r *tuiRun) waitConnected(t *testing.T, st statusapi.Status) {
	t.Helper()
	oc := &OpenCode{OpenCode: &ochost.OpenCode{URL: st.Servers[0].URL, Password: tuiPassword, Gen: r.gen.Gen}}
	oc.WaitStatus(t, r.p.Dir, "s", "connected", 60*time.Second)
}

// tuiPassword is the password of the TUI's OpenCode (startTUI).
const tuiPassword = "tui-e2e-password"

// startTUI starts `run -- opencode` of release g in a pseudo-terminal, in
// a CLI home (newCLIHome), from a new project with one stdio server "s".
func startTUI(t *testing.T, g gen) *tuiRun {
	t.Helper()
	home, env := g.newCLIHome(t, tuiPassword)
	p := g.newProject(t, nil)
	rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
	r := &tuiRun{gen: g, logFile: filepath.Join(t.TempDir(), "run.log"), home: home, p: p, screen: &ochost.Buffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(reconnectBin, "run", "--log-level", "debug", "--log-file", r.logFile, "--status-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--", g.Bin)
	r.cmd.Env = append(append(ochost.Env(home), env...), "TERM=xterm-256color")
	r.cmd.Dir = p.Dir
	tty, err := pty.StartWithSize(r.cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	r.tty = tty
	go func() { _, _ = io.Copy(r.screen, tty) }()
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
		tty.Close()
		if t.Failed() {
			b, _ := os.ReadFile(r.logFile)
			t.Logf("wrapper log:\n%s\nthe TUI's screen, last 2000 bytes, escaped:\n%q", b, lastBytes(r.screen.String(), 2000))
		}
	})
	return r
}

// quit types ctrl+c at the TUI's empty prompt until it quits (the first
// may only clear the prompt, or arrive while it still starts), and
// returns the wrapper's exit code.
func (r *tuiRun) quit(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, _ = r.tty.Write([]byte{3})
		select {
		case <-r.done:
			return exitCode(r.cmd.ProcessState)
		case <-time.After(3 * time.Second):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the TUI did not quit on ctrl+c; screen bytes: %d", len(r.screen.String()))
		}
	}
}

// exitCode is what a shell says of a process that ended: its exit code,
// or 128+N when signal N killed it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func waitFile(t testing.TB, path, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), s) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s has no %q within %v:\n%s", path, s, timeout, b)
}

// A server that never becomes healthy: run says so with its last output,
// stops it, and exits non-zero. The command is OpenCode of either
// generation: a script that answers --version as the release does (and
// so is wrapped as that release's serve) and never listens, and the real
// binary given less time than it takes to start.
func TestRunNeverHealthy(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.newHome(t)
		version, err := exec.Command(g.Bin, "--version").Output()
		if err != nil {
			t.Fatal(err)
		}
		bin := t.TempDir()
		script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = --version ]; then printf '%%s' '%s'; exit 0; fi\necho starting up; echo 'fatal: cannot bind' >&2; exec sleep 60\n", version)
		if err := os.WriteFile(filepath.Join(bin, "opencode"), []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
		w := startRun(t, home, home, nil, []string{"--start-timeout", "2s"}, filepath.Join(bin, "opencode"), "serve")
		code := w.wait(t, 20*time.Second)
		out := w.out.String()
		if code == 0 || !strings.Contains(out, "did not become healthy within 2s") || !strings.Contains(out, "fatal: cannot bind") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		waitNoProcesses(t, bin)

		w = startRun(t, home, home, nil, []string{"--start-timeout", "100ms"}, g.Bin, "serve")
		code = w.wait(t, 30*time.Second)
		if out := w.out.String(); code == 0 || !strings.Contains(out, "did not become healthy within 100ms") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		waitNoProcesses(t, home)
	})
}

// If OpenCode dies, the wrapper stops, reports it, exits with 128+9 and
// leaves none of its MCP servers behind.
func TestRunChildKilled(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		w, oc, p, _ := runServe(t, g)
		oc.Status(t, p.Dir)
		kids := childPIDs(w.cmd.Process.Pid)
		if len(kids) != 1 {
			t.Fatalf("wrapper children = %v, want the one opencode", kids)
		}
		_ = syscall.Kill(kids[0], syscall.SIGKILL)
		if code := w.wait(t, 15*time.Second); code != 128+9 {
			t.Fatalf("exit code = %d, want 137", code)
		}
		w.waitLog(t, "killed by signal 9", time.Second)
		waitNoProcesses(t, p.LogDir)
	})
}

// childPIDs lists the live children of ppid.
func childPIDs(ppid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		var state string
		var parent int
		if _, err := fmt.Sscanf(s[i+2:], "%s %d", &state, &parent); err == nil && parent == ppid && state != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// daemonsOf lists the daemons running in the hermetic home (its
// registry, $XDG_STATE_HOME/mcp-reconnect/daemons).
func daemonsOf(t testing.TB, home string) []registry.Entry {
	t.Helper()
	ents, err := (&registry.Registry{Dir: filepath.Join(home, "state", "mcp-reconnect", "daemons")}).List()
	if err != nil {
		t.Fatal(err)
	}
	return ents
}

// daemonStatus is what `mcp-reconnect status --json` prints in the
// hermetic home, as a user runs it: the running daemon's status, found in
// the registry. It fails unless exactly one daemon runs there.
func daemonStatus(t testing.TB, home string) statusapi.Status {
	t.Helper()
	cmd := exec.Command(reconnectBin, "status", "--json")
	cmd.Env = ochost.Env(home)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-reconnect status --json: %v\n%s", err, out)
	}
	var st struct {
		statusapi.Status
		Daemons []json.RawMessage `json:"daemons"`
	}
	if err := json.Unmarshal(out, &st); err != nil || len(st.Daemons) > 0 || st.Daemon == nil {
		t.Fatalf("status --json, want one daemon's status: %v\n%s", err, out)
	}
	return st.Status
}

// waitWatched waits until the newest process of p's stdio server name
// runs and one daemon, the only one registered in home, follows the
// OpenCode process that runs it (its parent: 1.x's serve or TUI, 2.x's
// background service) with its event stream subscribed, and returns
// that daemon's status.
func waitWatched(t testing.TB, home string, p *Project, name string, timeout time.Duration) statusapi.Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var last any = "no daemon registered"
		if starts := p.Starts(t, name); len(starts) > 0 {
			opencode := parentPID(starts[len(starts)-1])
			if ents := daemonsOf(t, home); len(ents) > 1 {
				t.Fatalf("%d daemons registered, want one: %+v", len(ents), ents)
			} else if len(ents) == 1 {
				st := daemonStatus(t, home)
				for _, s := range st.Servers {
					if s.Processes != nil && s.Processes.OpenCodePID == opencode && s.Stream.Connected {
						return st
					}
				}
				last = st.Servers
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon follows the OpenCode that runs %s's server %s within %v: %+v", p.Dir, name, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitDaemonShows waits until the one daemon running in home shows
// server name of directory dir in status want (its view follows its own
// reads: a moment after OpenCode's).
func waitDaemonShows(t testing.TB, home, dir, name, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := daemonStatus(t, home)
		for _, s := range st.Servers {
			for _, d := range s.Directories {
				for _, sv := range d.Servers {
					if d.Directory == dir && sv.Name == name && sv.Status == want {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not show %s's server %s %s within %v: %+v", dir, name, want, timeout, st.Servers)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// parentPID is pid's parent (0 when pid is gone).
func parentPID(pid int) int {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	var state string
	var ppid int
	if i < 0 {
		return 0
	}
	if _, err := fmt.Sscanf(s[i+2:], "%s %d", &state, &ppid); err != nil {
		return 0
	}
	return ppid
}

// run --directory D -- <a command that uses a server>, run from another
// directory, leaves exactly one daemon watching the OpenCode that serves
// D, with D armed (its MCP servers started), and a stdio server of D
// killed is connected again through it within repairBound: on 1.x the
// command is `serve` (run supervises it and is that daemon); on 2.x it is
// `mcp list`, which attaches to the background service and exits with
// OpenCode's code, while the service and the daemon run started stay.
func TestRunWatchesTheServerItsCommandUses(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		const password = "uses-e2e-password"
		home, env := g.newCLIHome(t, password)
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		startRun(t, home, home, env, []string{"--directory", p.Dir}, append([]string{g.Bin}, g.UsesServer...)...)
		p.WaitStarts(t, "s", 1, 60*time.Second)
		st := waitWatched(t, home, p, "s", 30*time.Second)
		oc := &OpenCode{OpenCode: &ochost.OpenCode{URL: st.Servers[0].URL, Password: password, Gen: g.Gen}}
		n, killed := p.KillConnected(t, oc, "s")
		p.WaitStarts(t, "s", n+1, repairBound)
		oc.WaitStatus(t, p.Dir, "s", "connected", repairBound-time.Since(killed))
		t.Logf("connected again %v after the kill", time.Since(killed).Round(time.Millisecond))
		waitWatched(t, home, p, "s", 10*time.Second)
		waitDaemonShows(t, home, p.Dir, "s", "connected", 10*time.Second)
	})
}

// runCLI runs `mcp-reconnect run [flags] -- opencode args...` of release
// g to its end, from dir in home with env, and returns its exit code and
// output.
func runCLI(t *testing.T, g gen, home, dir string, env, flags []string, args ...string) (int, string) {
	t.Helper()
	w := startRun(t, home, dir, env, flags, append([]string{g.Bin}, args...)...)
	code := w.wait(t, 90*time.Second)
	return code, w.out.String()
}

// plainCLI runs `opencode args...` of release g without the wrapper, as
// runCLI does, and returns its exit code.
func plainCLI(t *testing.T, g gen, home, dir string, env []string, args ...string) int {
	t.Helper()
	cmd := exec.Command(g.Bin, args...)
	cmd.Env, cmd.Dir = append(ochost.Env(home), env...), dir
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("opencode %v: %v\n%s", args, err, out)
	}
	return exitCode(cmd.ProcessState)
}

// serviceOf reads the OpenCode 2 service file of home (nil when there is
// none: no service runs).
func serviceOf(t testing.TB, home string) *opencode.Service {
	t.Helper()
	svc, err := opencode.ReadServiceFile(filepath.Join(home, "state", "opencode", "service.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &svc
}

// waitFollowsService waits until the one daemon of home says it follows
// home's service file and the service pid it registers, and its registry
// entry names the service's URL (so `status --url` and a `watch --url`
// of that URL find it).
func waitFollowsService(t testing.TB, home string, svc *opencode.Service, timeout time.Duration) {
	t.Helper()
	file := filepath.Join(home, "state", "opencode", "service.json")
	deadline := time.Now().Add(timeout)
	for {
		st := daemonStatus(t, home)
		ents := daemonsOf(t, home)
		if len(st.Servers) == 1 && st.Servers[0].Service != nil && st.Servers[0].Service.File == file && st.Servers[0].Service.PID == svc.PID && st.Servers[0].Stream.Connected &&
			len(ents) == 1 && ents[0].Watches(svc.URL) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not follow the service of %s (pid %d, %s) within %v: %+v, registered %+v", file, svc.PID, svc.URL, timeout, st.Servers, ents)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sameDaemon fails unless the one daemon registered in home is want.
func sameDaemon(t testing.TB, home string, want registry.Entry, after string) {
	t.Helper()
	if ents := daemonsOf(t, home); len(ents) != 1 || ents[0].PID != want.PID || ents[0].Service != want.Service {
		t.Fatalf("after %s: registered daemons %+v, want only the one of pid %d following %s", after, ents, want.PID, want.Service)
	}
}

// Every OpenCode 2 command that attaches to the background service,
// through run, leaves that service watched by one daemon, started once:
// `mcp list` exits with OpenCode's code and leaves service.json in place
// and one registry entry following it, whose status follows the
// service's pid within 5 s; a second command, two at once, and a failing
// one leave that same entry; --version, `service stop` and a
// --standalone command add none (the last starts no service either); and
// when the service was stopped between two commands, the next one starts
// it again and the same daemon follows its new pid and repairs a
// crashed stdio server of the directory run names through it.
func TestRunLeavesTheOpenCode2ServiceWatchedByOneDaemon(t *testing.T) {
	onlyGeneration(t, ochost.Gen2, func(t *testing.T, g gen) {
		const password = "service-e2e-password"
		home, env := g.newCLIHome(t, password)
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		file := filepath.Join(home, "state", "opencode", "service.json")

		code, out := runCLI(t, g, home, p.Dir, env, nil, "mcp", "list")
		if want := plainCLI(t, g, home, p.Dir, env, "mcp", "list"); code != want {
			t.Fatalf("run -- opencode mcp list exited %d, opencode mcp list %d; output:\n%s", code, want, out)
		}
		svc := serviceOf(t, home)
		if svc == nil {
			t.Fatalf("no %s after mcp list: the service is not running", file)
		}
		ents := daemonsOf(t, home)
		if len(ents) != 1 || ents[0].Service != file {
			t.Fatalf("registered daemons %+v, want one following %s", ents, file)
		}
		daemon := ents[0]
		waitFollowsService(t, home, svc, 5*time.Second)

		if code, out := runCLI(t, g, home, p.Dir, env, nil, "mcp", "list"); code != 0 {
			t.Fatalf("a second mcp list exited %d:\n%s", code, out)
		}
		sameDaemon(t, home, daemon, "a second mcp list")
		var both [2]*wrapper
		for i := range both {
			both[i] = startRun(t, home, p.Dir, env, nil, g.Bin, "session", "list")
		}
		for _, w := range both {
			if code := w.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("session list exited %d:\n%s", code, w.out)
			}
		}
		sameDaemon(t, home, daemon, "two session list at once")
		code, out = runCLI(t, g, home, p.Dir, env, nil, "session", "delete", "ses_nosuch")
		if want := plainCLI(t, g, home, p.Dir, env, "session", "delete", "ses_nosuch"); code != want || code == 0 {
			t.Fatalf("run -- opencode session delete ses_nosuch exited %d, opencode itself %d (want its failure); output:\n%s", code, want, out)
		}
		sameDaemon(t, home, daemon, "a failing session delete")

		if code, out := runCLI(t, g, home, p.Dir, env, nil, "--version"); code != 0 || !strings.Contains(out, g.Name) {
			t.Fatalf("run -- opencode --version: exit %d:\n%s", code, out)
		}
		sameDaemon(t, home, daemon, "--version")
		if code, out := runCLI(t, g, home, p.Dir, env, nil, "service", "stop"); code != 0 || serviceOf(t, home) != nil {
			t.Fatalf("run -- opencode service stop: exit %d, service file left %v:\n%s", code, serviceOf(t, home) != nil, out)
		}
		sameDaemon(t, home, daemon, "service stop")
		if code, out := runCLI(t, g, home, p.Dir, env, nil, "session", "list", "--standalone"); code != 0 || serviceOf(t, home) != nil {
			t.Fatalf("run -- opencode session list --standalone: exit %d, started the service %v:\n%s", code, serviceOf(t, home) != nil, out)
		}
		sameDaemon(t, home, daemon, "a --standalone command")

		before := len(p.Starts(t, "s"))
		if code, out := runCLI(t, g, home, p.Dir, env, []string{"--directory", p.Dir}, "mcp", "list"); code != 0 {
			t.Fatalf("mcp list after service stop exited %d:\n%s", code, out)
		}
		next := serviceOf(t, home)
		if next == nil || next.PID == svc.PID {
			t.Fatalf("mcp list did not start the service again: %+v", next)
		}
		waitFollowsService(t, home, next, 5*time.Second)
		sameDaemon(t, home, daemon, "the service started again")
		p.WaitStarts(t, "s", before+1, 30*time.Second)
		oc := &OpenCode{OpenCode: &ochost.OpenCode{URL: next.URL, Password: password, Gen: g.Gen}}
		n, killed := p.KillConnected(t, oc, "s")
		p.WaitStarts(t, "s", n+1, repairBound)
		oc.WaitStatus(t, p.Dir, "s", "connected", repairBound-time.Since(killed))
		t.Logf("connected again %v after the kill", time.Since(killed).Round(time.Millisecond))
		waitDaemonShows(t, home, p.Dir, "s", "connected", 10*time.Second)
	})
}

// Three OpenCode 2 commands run at once, through run, with no service
// and no daemon yet: they start one daemon, and it follows the one
// service they leave running.
func TestRunOfOpenCode2CommandsRacingToStartTheService(t *testing.T) {
	onlyGeneration(t, ochost.Gen2, func(t *testing.T, g gen) {
		home, env := g.newCLIHome(t, "race-e2e-password")
		p := g.newProject(t, nil)
		var all [3]*wrapper
		for i := range all {
			all[i] = startRun(t, home, p.Dir, env, nil, g.Bin, "session", "list")
		}
		for _, w := range all {
			if code := w.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("session list exited %d:\n%s", code, w.out)
			}
		}
		svc := serviceOf(t, home)
		if svc == nil {
			t.Fatal("no service runs after three commands")
		}
		if ents := daemonsOf(t, home); len(ents) != 1 {
			t.Fatalf("registered daemons %+v, want one", ents)
		}
		waitFollowsService(t, home, svc, 5*time.Second)
		for _, pid := range servicesOf(home) {
			if pid != svc.PID {
				t.Errorf("a second service (pid %d) runs beside the registered one (pid %d), unwatched", pid, svc.PID)
			}
		}
	})
}

// servicesOf lists the live `opencode serve --service` processes of the
// hermetic home.
func servicesOf(home string) []int {
	return processesOf(home, "serve\x00--service")
}

// processesOf lists the live processes of the hermetic home (their
// HOME) whose command line contains s.
func processesOf(home, s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if environValue(pid, "HOME") == home && strings.Contains(string(cmdline), s) && !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// An OpenCode 2 command with --standalone runs a private server whose
// password only it knows (docs/guide.md): run passes it through
// unwatched, with its exit code, starting no daemon and no service.
func TestRunPassesOpenCode2StandaloneThroughUnwatched(t *testing.T) {
	onlyGeneration(t, ochost.Gen2, func(t *testing.T, g gen) {
		home, env := g.newCLIHome(t, "standalone-e2e-password")
		p := g.newProject(t, nil)
		args := []string{"session", "delete", "--standalone", "ses_nosuch"}
		code, out := runCLI(t, g, home, p.Dir, env, nil, args...)
		if ents, left := daemonsOf(t, home), processesOf(home, reconnectBin); len(ents) != 0 || len(left) != 0 {
			t.Fatalf("a --standalone command started a daemon: registered %+v, running %v", ents, left)
		}
		if serviceOf(t, home) != nil {
			t.Fatal("a --standalone command started the background service")
		}
		if want := plainCLI(t, g, home, p.Dir, env, args...); code != want || code == 0 {
			t.Fatalf("run -- opencode %v exited %d, opencode itself %d (want its failure); output:\n%s", args, code, want, out)
		}
	})
}

// The TUI with no terminal (stdin /dev/null, output a pipe) still uses a
// server, which is watched by one daemon; when the TUI is killed with
// SIGKILL, the wrapper's exit code says so, and no MCP server of its
// directory is left running unwatched: on 1.x the TUI's own server ends
// with it, on 2.x the background service it started stays, and the
// daemon still follows it.
func TestRunTUIWithoutATerminalKilled(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home, env := g.newCLIHome(t, "notty-e2e-password")
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		w := startRun(t, home, p.Dir, env, nil, g.Bin)
		p.WaitStarts(t, "s", 1, 60*time.Second)
		waitWatched(t, home, p, "s", 60*time.Second)

		tui := tuiProcess(t, w, g.Bin)
		_ = syscall.Kill(tui, syscall.SIGKILL)
		if code := w.wait(t, 15*time.Second); code != 128+9 {
			t.Fatalf("exit code = %d, want 137", code)
		}
		waitNoUnwatchedServer(t, home, p, "s", 5*time.Second)
	})
}

// tuiProcess is the OpenCode process of w's command: the wrapper's child
// (1.x: run supervises the TUI), or the wrapper's own process (2.x: run
// became the TUI).
func tuiProcess(t testing.TB, w *wrapper, bin string) int {
	t.Helper()
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range append([]int{w.cmd.Process.Pid}, childPIDs(w.cmd.Process.Pid)...) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe == want {
			return pid
		}
	}
	t.Fatalf("no %s among the wrapper (pid %d) and its children", want, w.cmd.Process.Pid)
	return 0
}

// waitNoUnwatchedServer waits until every live process of p's stdio
// server name is the child of an OpenCode that a daemon running in home
// follows.
func waitNoUnwatchedServer(t testing.TB, home string, p *Project, name string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		followed := map[int]bool{}
		if len(daemonsOf(t, home)) > 0 {
			for _, s := range daemonStatus(t, home).Servers {
				if s.Processes != nil {
					followed[s.Processes.OpenCodePID] = true
				}
			}
		}
		var unwatched []string
		for _, pid := range p.Starts(t, name) {
			if ppid := parentPID(pid); ppid != 0 && !followed[ppid] && !zombie(pid) {
				unwatched = append(unwatched, fmt.Sprintf("pid %d (parent %d)", pid, ppid))
			}
		}
		if len(unwatched) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's server %s runs unwatched: %v (daemons follow %v)", p.Dir, name, unwatched, followed)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and awaits its parent's wait.
func zombie(pid int) bool {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return strings.Contains(string(stat), ") Z ")
}

// run --directory D -- <an OpenCode 2 command>, while a daemon follows
// the service but the service is stopped (between two commands), from
// another directory than D: the command starts the service again, and D
// is watched there as --directory is on 1.x (armed, its MCP servers
// started, a crash repaired), not forgotten because the service came
// back.
func TestRunDirectoryOfOpenCode2IsWatchedWhenTheServiceComesBack(t *testing.T) {
	onlyGeneration(t, ochost.Gen2, func(t *testing.T, g gen) {
		const password = "comeback-e2e-password"
		home, env := g.newCLIHome(t, password)
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		for _, args := range [][]string{{"session", "list"}, {"service", "stop"}} {
			if code, out := runCLI(t, g, home, home, env, nil, args...); code != 0 {
				t.Fatalf("run -- opencode %v exited %d:\n%s", args, code, out)
			}
		}
		if serviceOf(t, home) != nil || len(daemonsOf(t, home)) != 1 {
			t.Fatalf("want a daemon and no service; registered %+v, service %+v", daemonsOf(t, home), serviceOf(t, home))
		}

		if code, out := runCLI(t, g, home, home, env, []string{"--directory", p.Dir}, "session", "list"); code != 0 {
			t.Fatalf("run --directory D -- opencode session list exited %d:\n%s", code, out)
		}
		p.WaitStarts(t, "s", 1, 30*time.Second)
		st := waitWatched(t, home, p, "s", 10*time.Second)
		oc := &OpenCode{OpenCode: &ochost.OpenCode{URL: st.Servers[0].URL, Password: password, Gen: g.Gen}}
		n, killed := p.KillConnected(t, oc, "s")
		p.WaitStarts(t, "s", n+1, repairBound)
		oc.WaitStatus(t, p.Dir, "s", "connected", repairBound-time.Since(killed))
	})
}

// lastBytes is the end of s, at most n bytes.
func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
