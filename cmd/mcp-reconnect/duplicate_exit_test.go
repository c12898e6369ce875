package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
)

// otherDaemon registers a running process (not this one) as a daemon
// watching url, and returns its pid.
func otherDaemon(t *testing.T, url string) int {
	t.Helper()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no sleep under CI: %v", err)
		}
		t.Skipf("no sleep to stand for another daemon: %v", err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	remove, err := reg.Register(registry.Entry{PID: other.Process.Pid, URLs: []string{url}, StatusAddr: "127.0.0.1:4097", Started: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return other.Process.Pid
}

// A watch refused because another daemon watches the same server exits
// service.ExitDuplicate, which the unit does not restart after, and says
// why in one log line that names the other daemon's pid and the fix; the
// variable the Homebrew formula's service sets makes it exit 0 (launchd's
// KeepAlive restarts any other status); with --log-file the refusal
// reaches the terminal too.
func TestRefusedDuplicateExitsSoThatTheServiceIsNotRestarted(t *testing.T) {
	const url = "http://127.0.0.1:1"
	pid := otherDaemon(t, url)
	args := []string{"watch", "--url", url, "--status-addr", "", "--netwatch=false"}

	code, out, errOut := runCLI(t, args...)
	if code != service.ExitDuplicate {
		t.Fatalf("exit %d, want %d:\n%s%s", code, service.ExitDuplicate, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want one:\n%s", len(lines), errOut)
	}
	for _, want := range []string{"level=ERROR", "other_pid=" + strconv.Itoa(pid), "kill " + strconv.Itoa(pid), "mcp-reconnect status", "--allow-duplicate", "exit_status=78"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the refusal does not say %q:\n%s", want, lines[0])
		}
	}

	t.Setenv(service.DuplicateExitEnv, "0")
	if code, _, errOut := runCLI(t, args...); code != 0 || !strings.Contains(errOut, "other_pid="+strconv.Itoa(pid)) {
		t.Fatalf("with %s=0: exit %d, want 0 and the same line:\n%s", service.DuplicateExitEnv, code, errOut)
	}
	t.Setenv(service.DuplicateExitEnv, "nonsense")
	if code, _, _ := runCLI(t, args...); code != service.ExitDuplicate {
		t.Fatalf("with %s=nonsense: exit %d, want %d", service.DuplicateExitEnv, code, service.ExitDuplicate)
	}
	t.Setenv(service.DuplicateExitEnv, "")

	logFile := filepath.Join(t.TempDir(), "watch.log")
	code, _, errOut = runCLI(t, append(args, "--log-file", logFile)...)
	logged, _ := os.ReadFile(logFile)
	if code != service.ExitDuplicate || !strings.Contains(errOut, "pid "+strconv.Itoa(pid)) || !strings.Contains(string(logged), "other_pid="+strconv.Itoa(pid)) {
		t.Fatalf("with --log-file: exit %d, stderr %q, log %q", code, errOut, logged)
	}
}
