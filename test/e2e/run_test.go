package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/mcp-reconnect/mcp-reconnect/internal/ochost"
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
		return w.cmd.ProcessState.ExitCode()
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

// runServe starts `run -- opencode serve --port P` from a project with one
// stdio server "s", with a known password, and waits until it watches.
func runServe(t *testing.T) (*wrapper, *OpenCode, *Project, string) {
	t.Helper()
	needOpenCode(t)
	home := hermeticHome(t)
	p := newProject(t, nil)
	rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
	port := freePort(t)
	const password = "run-e2e-password"
	w := startRun(t, home, p.Dir, []string{"OPENCODE_SERVER_PASSWORD=" + password}, nil, opencodeBin, "serve", "--port", fmt.Sprint(port))
	w.waitLog(t, "watching opencode", 60*time.Second)
	oc := &OpenCode{OpenCode: &ochost.OpenCode{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Password: password}}
	return w, oc, p, home
}

// run -- opencode serve: a crashed stdio server is recovered; the log file
// is private; SIGTERM to the wrapper leaves no process behind.
func TestRunServeRecoversAndCleansUp(t *testing.T) {
	w, oc, p, home := runServe(t)

	oc.Status(t, p.Dir)
	killPID(t, p.Starts(t, "s")[0])
	p.WaitStarts(t, "s", 2, 30*time.Second)
	oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)
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
	code := w.wait(t, 15*time.Second)
	if code != 128+int(syscall.SIGTERM) { // opencode serve has no SIGTERM handler: it dies of it
		t.Errorf("exit code after SIGTERM = %d", code)
	}
	// No opencode and no MCP server of this test may survive.
	waitNoProcesses(t, p.LogDir, home)
}

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

// With no password configured, run generates one: the server refuses a
// request without it, and the daemon (which has it) is connected.
func TestRunGeneratesPassword(t *testing.T) {
	needOpenCode(t)
	home := hermeticHome(t)
	port := freePort(t)
	w := startRun(t, home, home, nil, nil, opencodeBin, "serve", "--port", fmt.Sprint(port))
	w.waitLog(t, "watching opencode", 60*time.Second)
	resp, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/global/health", port))
	if err != nil || resp != 401 {
		t.Fatalf("request without the password: %d %v, want 401", resp, err)
	}
	log := w.waitLog(t, "generated_password=true", 5*time.Second)
	if strings.Contains(log, "OPENCODE_SERVER_PASSWORD=") {
		t.Fatal("the password reached the log")
	}
	// The child's command line carries no password.
	for _, p := range processesMentioning(home) {
		if strings.Contains(p, "PASSWORD") {
			t.Fatalf("a password on a command line: %s", p)
		}
	}
}

func httpGet(url string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := newRequest(ctx, url)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The wrapper exits with the child's exit code.
func TestRunExitCodes(t *testing.T) {
	needOpenCode(t)
	home := hermeticHome(t)
	w := startRun(t, home, home, nil, nil, "sh", "-c", "exit 3")
	if code := w.wait(t, 20*time.Second); code != 3 {
		t.Fatalf("exit code = %d, want 3", code)
	}
	// OpenCode itself failing: its port is taken.
	l, port := listenBusy(t)
	defer l()
	w = startRun(t, home, home, nil, nil, opencodeBin, "serve", "--port", fmt.Sprint(port))
	if code := w.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("exit code with the port taken = %d, want 1 (opencode's)", code)
	}
}

// run -- opencode (the TUI) under a pseudo-terminal: it renders, a crash
// inside it is recovered, it quits on its own key and the wrapper exits
// with its code.
func TestRunTUI(t *testing.T) {
	needOpenCode(t)
	home := hermeticHome(t)
	p := newProject(t, nil)
	rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
	logFile := filepath.Join(t.TempDir(), "run.log")
	cmd := exec.Command(reconnectBin, "run", "--log-level", "debug", "--log-file", logFile, "--status-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--", opencodeBin)
	cmd.Env = append(ochost.Env(home), "TERM=xterm-256color")
	cmd.Dir = p.Dir
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	screen := &ochost.Buffer{}
	go func() { _, _ = io.Copy(screen, tty) }()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("wrapper log:\n%s", b)
		}
	}()

	// The TUI starts its directory's MCP servers at once.
	p.WaitStarts(t, "s", 1, 60*time.Second)
	waitFile(t, logFile, "watching opencode", 60*time.Second)
	time.Sleep(2 * time.Second) // let it render
	if screen.String() == "" {
		t.Fatal("the TUI rendered nothing")
	}
	_ = pty.Setsize(tty, &pty.Winsize{Rows: 30, Cols: 100}) // a resize reaches it
	killPID(t, p.Starts(t, "s")[0])
	p.WaitStarts(t, "s", 2, 30*time.Second)
	waitFile(t, logFile, "reconnected MCP server", 30*time.Second)
	// The comeback is announced in the TUI itself.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(screen.String(), `reconnected (my projéct)`) {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect toast on the TUI's screen (%d bytes)", len(screen.String()))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// ctrl+c at an empty prompt quits the TUI with code 0.
	_, _ = tty.Write([]byte{3})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_, _ = tty.Write([]byte{3}) // the first may only clear the prompt
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatalf("the TUI did not quit on ctrl+c; screen bytes: %d", len(screen.String()))
		}
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("wrapper exit code = %d, want the TUI's 0", code)
	}
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
// stops it, and exits non-zero.
func TestRunNeverHealthy(t *testing.T) {
	needOpenCode(t)
	home := hermeticHome(t)
	port := freePort(t)
	script := "echo starting up; echo 'fatal: cannot bind' >&2; sleep 60"
	w := startRun(t, home, home, nil, []string{"--start-timeout", "2s"}, "sh", "-c", script, "--port", fmt.Sprint(port))
	code := w.wait(t, 20*time.Second)
	out := w.out.String()
	if code == 0 || !strings.Contains(out, "did not become healthy within 2s") || !strings.Contains(out, "fatal: cannot bind") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// If OpenCode dies, the wrapper stops, reports it, exits with 128+9 and
// leaves none of its MCP servers behind.
func TestRunChildKilled(t *testing.T) {
	w, oc, p, _ := runServe(t)
	oc.Status(t, p.Dir)
	kids := childPIDs(w.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("wrapper children = %v, want the one opencode", kids)
	}
	child := kids[0]
	_ = syscall.Kill(child, syscall.SIGKILL)
	if code := w.wait(t, 15*time.Second); code != 128+9 {
		t.Fatalf("exit code = %d, want 137", code)
	}
	w.waitLog(t, "killed by signal 9", time.Second)
	waitNoProcesses(t, p.LogDir)
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
