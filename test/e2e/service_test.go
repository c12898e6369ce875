package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
)

// cli runs the built mcp-reconnect with exactly env (no inherited
// variables but PATH when env lacks one).
func cli(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// homeFiles lists every file and symlink under home (directories apart),
// for "no file left behind".
func homeFiles(t *testing.T, home string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// writtenFile cuts the content of path out of `service install --dry-run`
// output ("would write PATH (mode M):" then lines indented four spaces).
func writtenFile(t *testing.T, out, path string) (string, string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, "would write "+path+" (mode ")
		if !ok {
			continue
		}
		mode := strings.TrimSuffix(rest, "):")
		var b strings.Builder
		for _, c := range lines[i+1:] {
			body, ok := strings.CutPrefix(c, "    ")
			if !ok {
				break
			}
			b.WriteString(body + "\n")
		}
		return mode, b.String()
	}
	t.Fatalf("dry run does not write %s:\n%s", path, out)
	return "", ""
}

// TestServiceDryRunUnitPassesSystemdAnalyze takes the unit from the real
// command's `service install --dry-run`, for a binary installed in a
// directory whose name needs quoting, and has `systemd-analyze --user
// verify` check it (it fails on an ExecStart whose executable does not
// exist after unquoting, and warns on unknown keys or bad values). The dry
// run changes nothing in the home.
func TestServiceDryRunUnitPassesSystemdAnalyze(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("systemd-analyze missing under CI=true: %v", err)
		}
		t.Skipf("systemd-analyze missing: %v", err)
	}
	root := t.TempDir()
	home := filepath.Join(root, "home")
	binDir := filepath.Join(root, "my tools %h $HOME")
	for _, d := range []string{home, binDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(binDir, "mcp-reconnect")
	copyFile(t, reconnectBin, bin, 0o755)
	cfg := filepath.Join(home, "my config $x.toml")
	if err := os.WriteFile(cfg, []byte("url = \"http://127.0.0.1:4096\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := homeFiles(t, home)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	code, out, errOut := cli(t, bin, env, "service", "install", "--dry-run", "--config", cfg)
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	unitPath := filepath.Join(home, ".config", "systemd", "user", service.UnitName)
	mode, unit := writtenFile(t, out, unitPath)
	if mode != "0644" || !strings.Contains(out, "would run: systemctl --user enable --now mcp-reconnect.service") {
		t.Fatalf("dry run output:\n%s", out)
	}
	if after := homeFiles(t, home); !equalStrings(before, after) {
		t.Fatalf("the dry run wrote %q", after)
	}
	dir := t.TempDir()
	runtime := filepath.Join(dir, "runtime")
	if err := os.Mkdir(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, service.UnitName), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "--user", "verify", filepath.Join(dir, service.UnitName))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime)
	vout, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(vout)) != 0 {
		t.Fatalf("systemd-analyze --user verify: %v\n%s\n--- unit:\n%s", err, vout, unit)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// fakeManager puts a fake systemctl on PATH that records its arguments
// (one line per call) and answers `show` with the pid in pidFile as the
// service's main process.
func fakeManager(t *testing.T) (pathDir, callLog, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	callLog, pidFile = filepath.Join(dir, "calls"), filepath.Join(dir, "pid")
	script := `#!/bin/sh
echo "$(basename "$0") $*" >> "` + callLog + `"
pid=$(cat "` + pidFile + `" 2>/dev/null || echo 0)
case "$1 $2" in
"--user show") printf 'LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=%s\nNRestarts=1\nUnitFileState=enabled\n' "$pid" ;;
esac
exit 0
`
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, callLog, pidFile
}

func readCalls(t *testing.T, callLog string) []string {
	t.Helper()
	b, err := os.ReadFile(callLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(callLog)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// serviceJSON is the part of `service status --json` the tests read.
type serviceJSON struct {
	Service struct {
		Installed bool   `json:"installed"`
		Current   bool   `json:"current"`
		Path      string `json:"path"`
		Running   *struct {
			Active bool `json:"active"`
			PID    int  `json:"pid"`
		} `json:"running"`
	} `json:"service"`
	Daemon *struct {
		PID    int             `json:"pid"`
		URLs   []string        `json:"urls"`
		Status json.RawMessage `json:"status"`
		Error  string          `json:"error"`
	} `json:"daemon"`
	DaemonError string `json:"daemon_error"`
}

// TestServiceInstallStatusUninstallWithFakeManager runs the real binary's
// install, status and uninstall against a fake systemctl on PATH: the
// files are written where and as they should be, exactly the expected
// commands run, status finds the daemon the manager names in the registry
// and shows what it sees, and uninstall leaves no file behind.
func TestServiceInstallStatusUninstallWithFakeManager(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	fakeDir, callLog, pidFile := fakeManager(t)
	home := filepath.Join(t.TempDir(), "home")
	cfgDir := filepath.Join(home, ".config", "mcp-reconnect")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	closed := freePort(t)
	opencodeURL := fmt.Sprintf("http://127.0.0.1:%d", closed)
	cfg := filepath.Join(cfgDir, "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("url = %q\nstatus-addr = \"127.0.0.1:0\"\n", opencodeURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	before := homeFiles(t, home)
	env := []string{"HOME=" + home, "PATH=" + fakeDir + ":" + os.Getenv("PATH"), "OPENCODE_SERVER_PASSWORD=hunter2-not-for-the-unit"}

	code, out, errOut := cli(t, reconnectBin, env, "service", "install")
	if code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "$OPENCODE_SERVER_PASSWORD set in this shell") || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("install did not name (only) the shell-only password:\n%s%s", out, errOut)
	}
	svcFile := filepath.Join(home, ".config/systemd/user/mcp-reconnect.service")
	content, err := os.ReadFile(svcFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(svcFile); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if !bytes.Contains(content, []byte(reconnectBin)) || bytes.Contains(content, []byte("hunter2")) || bytes.Contains(content, []byte("--config")) {
		t.Fatalf("service file:\n%s", content)
	}
	want := []string{"systemctl --user daemon-reload", "systemctl --user enable --now mcp-reconnect.service"}
	if got := readCalls(t, callLog); !equalStrings(got, want) {
		t.Fatalf("install ran %q, want %q", got, want)
	}

	// Be the service manager: start what it would start, and name
	// its pid as the service's main process.
	d := exec.Command(reconnectBin, "watch")
	d.Env = env[:2]
	var dlog bytes.Buffer
	d.Stdout, d.Stderr = &dlog, &dlog
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Process.Kill(); _ = d.Wait() })
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(d.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	var st serviceJSON
	waitFor(t, 20*time.Second, "the service's daemon in service status", func() bool {
		code, out, _ := cli(t, reconnectBin, env, "service", "status", "--json")
		st = serviceJSON{}
		return json.Unmarshal([]byte(out), &st) == nil && code == 0 && st.Daemon != nil && len(st.Daemon.Status) > 0
	})
	if st.Daemon.PID != d.Process.Pid || len(st.Daemon.URLs) != 1 || st.Daemon.URLs[0] != opencodeURL || !st.Service.Current {
		t.Fatalf("status: %+v %+v", st.Service, *st.Daemon)
	}
	code, out, _ = cli(t, reconnectBin, env, "service", "status")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("daemon:    pid %d", d.Process.Pid)) || !strings.Contains(out, opencodeURL+": event stream down") ||
		!strings.Contains(out, "installed: yes, as `service install` would write it now") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	_ = d.Process.Signal(syscall.SIGTERM)
	_ = d.Wait()
	readCalls(t, callLog)

	code, out, errOut = cli(t, reconnectBin, env, "service", "uninstall")
	if code != 0 {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errOut)
	}
	want = []string{"systemctl --user disable --now mcp-reconnect.service", "systemctl --user daemon-reload"}
	if got := readCalls(t, callLog); !equalStrings(got, want) {
		t.Fatalf("uninstall ran %q, want %q", got, want)
	}
	if after := homeFiles(t, home); !equalStrings(before, after) {
		t.Fatalf("files left behind: %q (before: %q)", after, before)
	}
	if _, err := os.Stat(filepath.Dir(svcFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s left behind", filepath.Dir(svcFile))
	}
	code, out, _ = cli(t, reconnectBin, env, "service", "uninstall")
	if code != 0 || !strings.Contains(out, "not installed") {
		t.Fatalf("second uninstall: %d %s", code, out)
	}
	if code, _, _ := cli(t, reconnectBin, env, "service", "status"); code != 3 {
		t.Fatalf("status after uninstall exits %d, want 3", code)
	}
}

// TestServiceRestartedBySystemd is the real thing, where the user's
// systemd runs: install, see the daemon in the registry, kill it, see
// systemd start a new one within RestartSec and a margin, uninstall, and
// no file left behind. Where `systemctl --user` cannot reach a user
// manager (containers, CI runners without a login session) it skips with
// the exact error, also under CI=true: there is no user systemd to test.
func TestServiceRestartedBySystemd(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if out, err := exec.Command("systemctl", "--user", "show-environment").CombinedOutput(); err != nil {
		reason := fmt.Sprintf("no user systemd here: systemctl --user show-environment: %v: %s", err, bytes.TrimSpace(out))
		// Printed even without -v: a skip under CI=true is never silent.
		fmt.Fprintf(os.Stderr, "SKIP %s: %s\n", t.Name(), reason)
		t.Skip(reason)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	// The user manager reads units from the user's real config directory;
	// the registry and manifest go to a temporary XDG_STATE_HOME, pinned
	// into the unit.
	configHome := os.Getenv("XDG_CONFIG_HOME")
	if configHome == "" {
		configHome = filepath.Join(home, ".config")
	}
	unit := filepath.Join(configHome, "systemd", "user", service.UnitName)
	if _, err := os.Stat(unit); err == nil {
		t.Skipf("%s exists already (this user's own service); not touching it", unit)
	}
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("url = \"http://127.0.0.1:%d\"\nstatus-addr = \"127.0.0.1:0\"\n", freePort(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_STATE_HOME=" + state,
		"XDG_RUNTIME_DIR=" + os.Getenv("XDG_RUNTIME_DIR"), "DBUS_SESSION_BUS_ADDRESS=" + os.Getenv("DBUS_SESSION_BUS_ADDRESS")}
	if configHome != filepath.Join(home, ".config") {
		env = append(env, "XDG_CONFIG_HOME="+configHome)
	}
	code, out, errOut := cli(t, reconnectBin, env, "service", "install", "--config", cfg)
	t.Cleanup(func() { cli(t, reconnectBin, env, "service", "uninstall") })
	if code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	reg := &registry.Registry{Dir: filepath.Join(state, "mcp-reconnect", "daemons")}
	mainPID := func() int {
		out, _ := exec.Command("systemctl", "--user", "show", "--property=MainPID", "--value", service.UnitName).Output()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return pid
	}
	registered := func(pid int) bool {
		ents, _ := reg.List()
		for _, e := range ents {
			if e.PID == pid {
				return true
			}
		}
		return false
	}
	var first int
	waitFor(t, 30*time.Second, "the service's daemon in the registry", func() bool {
		first = mainPID()
		return first > 0 && registered(first)
	})
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var second int
	waitFor(t, time.Duration(service.RestartSec)*time.Second+15*time.Second, "systemd to restart the daemon", func() bool {
		second = mainPID()
		return second > 0 && second != first && registered(second)
	})
	t.Logf("restarted as pid %d %v after the kill", second, time.Since(killed).Round(100*time.Millisecond))
	code, out, errOut = cli(t, reconnectBin, env, "service", "uninstall")
	if code != 0 {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(unit); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unit left behind: %v", err)
	}
	if out, _ := exec.Command("systemctl", "--user", "show", "--property=LoadState", "--value", service.UnitName).Output(); strings.TrimSpace(string(out)) != "not-found" {
		t.Fatalf("unit still loaded: %s", out)
	}
	if files := homeFiles(t, state); len(files) != 0 {
		t.Fatalf("files left in the state directory: %q", files)
	}
}
