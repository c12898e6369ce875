package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// A config file holding a password that others can read is refused with
// the fix; a private one, or one without a password, is fine.
func TestConfigWithPasswordMustBePrivate(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		path := writeConfig(t, `password = "s3cret-pw"`)
		_ = os.Chmod(path, mode)
		code, out, errOut := runCLI(t, "watch", "--config", path, "--status-addr", "", "--url", "http://127.0.0.1:1", "--jitter", "7")
		if code == 0 || !strings.Contains(errOut, "chmod 600 "+path) || strings.Contains(out+errOut, "s3cret-pw") {
			t.Errorf("mode %04o: exit %d, stderr %q", mode, code, errOut)
		}
	}
	for body, mode := range map[string]os.FileMode{`password = "x"`: 0o600, `url = "http://127.0.0.1:1"`: 0o644} {
		path := writeConfig(t, body+"\njitter = 7")
		_ = os.Chmod(path, mode)
		// jitter 7 fails validation after the file is read: getting that
		// error proves the file itself was accepted.
		if _, _, errOut := runCLI(t, "watch", "--config", path); !strings.Contains(errOut, "jitter") {
			t.Errorf("%q at %04o: stderr %q, want the file accepted", body, mode, errOut)
		}
	}
}

// A log file that already exists with loose permissions is made private.
func TestExistingLogFileMadePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.log")
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &watchFlags{logFile: p, logLevel: "info", logFormat: "text"}
	_, closeLog, err := f.logger(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	closeLog()
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("log file mode %v, want 0600", fi.Mode().Perm())
	}
}

// fakeDaemon is a status API with its own token, registered under pid.
type fakeDaemon struct {
	src   *countingSource
	entry registry.Entry
}

type countingSource struct {
	url   string
	calls int
	// armed are the directories its snapshot shows; dirs those it was
	// asked to reconnect.
	armed, dirs []string
}

func (c *countingSource) Snapshot() reconnect.Snapshot {
	s := reconnect.Snapshot{URL: c.url}
	for _, d := range c.armed {
		s.Directories = append(s.Directories, reconnect.DirSnapshot{Directory: d, ArmedBy: "session.updated"})
	}
	return s
}

func (c *countingSource) Arm(string, string) error { return nil }

func (c *countingSource) Reconnect(dir string, _ []string) (reconnect.ReconnectResult, error) {
	c.calls++
	c.dirs = append(c.dirs, dir)
	return reconnect.ReconnectResult{URL: c.url, Directories: []string{dir}}, nil
}

func startFakeDaemon(t *testing.T, pid int, ocURL string) *fakeDaemon {
	t.Helper()
	token, _ := registry.NewToken()
	src := &countingSource{url: ocURL}
	s := &statusapi.API{Sources: []statusapi.Source{src}, Broker: statusapi.NewBroker(), Metrics: metrics.NewSet(), Token: token}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Broker.Close(); hs.Close() })
	e := registry.Entry{PID: pid, URLs: []string{ocURL}, StatusAddr: strings.TrimPrefix(hs.URL, "http://"), Token: token, Started: time.Now()}
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	remove, err := reg.Register(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return &fakeDaemon{src: src, entry: e}
}

// otherProcess is a live process standing in for a second daemon's pid.
func otherProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// Two daemons at once: status lists both, reconnect refuses to guess and
// --url (or --status-addr, or --all) picks. A daemon killed with SIGKILL
// leaves a file the next status ignores and removes.
func TestRegistryChoosesDaemons(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	if code, _, errOut := runCLI(t, "status"); code == 0 || !strings.Contains(errOut, "no mcp-reconnect daemon is running") || !strings.Contains(errOut, "mcp-reconnect watch") {
		t.Fatalf("no daemon: exit %d, %q", code, errOut)
	}
	a := startFakeDaemon(t, os.Getpid(), "http://127.0.0.1:4101")
	other := otherProcess(t)
	b := startFakeDaemon(t, other.Process.Pid, "http://127.0.0.1:4102")

	code, out, errOut := runCLI(t, "status")
	if code != 0 || !strings.Contains(out, "http://127.0.0.1:4101") || !strings.Contains(out, "http://127.0.0.1:4102") {
		t.Fatalf("status with two daemons: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "status", "--json")
	var js struct {
		Daemons []struct {
			PID    int               `json:"pid"`
			Status *statusapi.Status `json:"status"`
		} `json:"daemons"`
	}
	if err := json.Unmarshal([]byte(out), &js); code != 0 || err != nil || len(js.Daemons) != 2 || js.Daemons[1].Status == nil {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	if strings.Contains(out, a.entry.Token) || strings.Contains(out, b.entry.Token) {
		t.Fatal("status --json shows a token")
	}

	code, _, errOut = runCLI(t, "reconnect", "--directory", "/p")
	if code == 0 || !strings.Contains(errOut, "several") || !strings.Contains(errOut, "--url http://127.0.0.1:4102") || a.src.calls+b.src.calls != 0 {
		t.Fatalf("reconnect with two daemons: exit %d, %q, calls %d/%d", code, errOut, a.src.calls, b.src.calls)
	}
	t.Setenv("OPENCODE_URL", "http://127.0.0.1:4101") // the environment does not pick
	if code, _, _ := runCLI(t, "reconnect"); code == 0 {
		t.Fatal("$OPENCODE_URL picked a daemon")
	}
	code, out, errOut = runCLI(t, "reconnect", "--url", "http://127.0.0.1:4102/", "--directory", "/p")
	if code != 0 || b.src.calls != 1 || a.src.calls != 0 || !strings.Contains(out, "reconnect scheduled: http://127.0.0.1:4102 /p") {
		t.Fatalf("reconnect --url: exit %d, %q %q, calls %d/%d", code, out, errOut, a.src.calls, b.src.calls)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--status-addr", a.entry.StatusAddr, "--directory", "/p"); code != 0 || a.src.calls != 1 {
		t.Fatalf("reconnect --status-addr: exit %d, %q", code, errOut)
	}
	a.src.armed, b.src.armed = []string{"/p"}, []string{"/p"} // --all retries a directory only where it is armed
	if code, _, errOut := runCLI(t, "reconnect", "--all", "--directory", "/p"); code != 0 || a.src.calls != 2 || b.src.calls != 2 {
		t.Fatalf("reconnect --all: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--url", "http://127.0.0.1:9"); code == 0 || !strings.Contains(errOut, "no running mcp-reconnect daemon watches http://127.0.0.1:9") {
		t.Fatalf("reconnect --url unknown: exit %d, %q", code, errOut)
	}

	// SIGKILL the second "daemon": its file stays until the next status.
	_ = other.Process.Signal(syscall.SIGKILL)
	_ = other.Wait()
	reg, _ := registry.Default()
	stale := filepath.Join(reg.Dir, strconv.Itoa(b.entry.PID)+".json")
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the killed daemon's file should still be there: %v", err)
	}
	code, out, _ = runCLI(t, "status")
	if code != 0 || strings.Contains(out, "4102") || !strings.Contains(out, "4101") {
		t.Fatalf("status after SIGKILL: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale file was not removed: %v", err)
	}
	// With one daemon left, reconnect needs no choice.
	if code, _, errOut := runCLI(t, "reconnect", "--directory", "/p"); code != 0 || a.src.calls != 3 {
		t.Fatalf("reconnect with one daemon: exit %d, %q", code, errOut)
	}
}

// --status-addr of a daemon that is not registered: no token, so the
// daemon refuses, and the error says why.
func TestReconnectUnregisteredAddrRefused(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	d := startFakeDaemon(t, os.Getpid(), "http://127.0.0.1:4103")
	reg, _ := registry.Default()
	_ = os.Remove(filepath.Join(reg.Dir, strconv.Itoa(os.Getpid())+".json"))
	code, _, errOut := runCLI(t, "reconnect", "--status-addr", d.entry.StatusAddr)
	if code == 0 || !strings.Contains(errOut, "401") || d.src.calls != 0 || strings.Contains(errOut, d.entry.Token) {
		t.Fatalf("exit %d, %q", code, errOut)
	}
}

// reconnect --all --directory D retries D only in the daemons (and the
// OpenCode servers) where D is already armed, and arms it nowhere:
// arming makes that OpenCode start D's MCP servers (rule 13), and --all
// names no server. --url names one, and then D is armed there.
func TestReconnectAllDirectoryArmsNothingNew(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	a := startFakeDaemon(t, os.Getpid(), "http://127.0.0.1:4111")
	other := otherProcess(t)
	b := startFakeDaemon(t, other.Process.Pid, "http://127.0.0.1:4112")
	a.src.armed = []string{"/p", "/q"}
	b.src.armed = []string{"/q"}

	code, out, errOut := runCLI(t, "reconnect", "--all", "--directory", "/p")
	if code != 0 || !slices.Equal(a.src.dirs, []string{"/p"}) || b.src.calls != 0 || !strings.Contains(out, "reconnect scheduled: http://127.0.0.1:4111 /p") {
		t.Fatalf("reconnect --all --directory /p: exit %d %q %q; asked a %v, b %v", code, out, errOut, a.src.dirs, b.src.dirs)
	}
	code, _, errOut = runCLI(t, "reconnect", "--all", "--directory", "/new")
	if code == 0 || !strings.Contains(errOut, "/new is armed in no running daemon") || !strings.Contains(errOut, "--url") || a.src.calls+b.src.calls != 1 {
		t.Fatalf("reconnect --all --directory /new: exit %d %q; asked a %v, b %v", code, errOut, a.src.dirs, b.src.dirs)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--all", "--directory", "/q"); code != 0 || a.src.calls != 2 || !slices.Equal(b.src.dirs, []string{"/q"}) {
		t.Fatalf("reconnect --all --directory /q: exit %d %q; asked a %v, b %v", code, errOut, a.src.dirs, b.src.dirs)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--all", "--url", "http://127.0.0.1:4112", "--directory", "/new"); code != 0 || !slices.Equal(b.src.dirs, []string{"/q", "/new"}) {
		t.Fatalf("reconnect --all --url --directory /new: exit %d %q; asked b %v", code, errOut, b.src.dirs)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--all"); code != 0 || a.src.calls != 3 || b.src.calls != 3 {
		t.Fatalf("reconnect --all: exit %d %q", code, errOut)
	}
}
