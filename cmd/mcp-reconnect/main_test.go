package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersionAndHelp(t *testing.T) {
	if code, out, _ := runCLI(t, "version"); code != 0 || !strings.HasPrefix(out, "mcp-reconnect ") {
		t.Fatalf("version: %d %q", code, out)
	}
	code, out, _ := runCLI(t, "watch", "--help")
	if code != 0 {
		t.Fatalf("watch --help exit %d", code)
	}
	for _, flag := range []string{"--url", "--username", "--password", "--directory", "--status-addr", "--initial-delay", "--max-delay",
		"--idle-interval", "--jitter", "--max-concurrent", "--fast-attempts", "--slow-interval", "--log-level", "--log-format"} {
		if !strings.Contains(out, flag) {
			t.Errorf("watch --help lacks %s", flag)
		}
	}
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	t.Setenv("OPENCODE_URL", "http://127.0.0.1:5000")
	t.Setenv("MCP_RECONNECT_INITIAL_DELAY", "not-a-duration") // ignored: the flag is given
	t.Setenv("MCP_RECONNECT_MAX_CONCURRENT", "7")
	t.Setenv("MCP_RECONNECT_DIRECTORY", "/a:/b c")
	t.Setenv("OPENCODE_SERVER_PASSWORD", "from-env")
	if err := fs.Parse([]string{"--initial-delay", "3s"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if len(f.urls) != 1 || f.urls[0] != "http://127.0.0.1:5000" || f.engine.Backoff.Initial != 3*time.Second || f.engine.MaxConcurrent != 7 || f.password != "from-env" {
		t.Fatalf("flags = %+v", f)
	}
	if len(f.directories) != 2 || f.directories[1] != "/b c" {
		t.Fatalf("directories = %q", f.directories)
	}
}

func TestBadSettingsNameTheirSource(t *testing.T) {
	t.Setenv("MCP_RECONNECT_MAX_CONCURRENT", "lots")
	code, _, errOut := runCLI(t, "watch")
	if code == 0 || !strings.Contains(errOut, "MCP_RECONNECT_MAX_CONCURRENT") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	t.Setenv("MCP_RECONNECT_MAX_CONCURRENT", "")
	cases := map[string][]string{
		"jitter":         {"watch", "--jitter", "1.5"},
		"max-concurrent": {"watch", "--max-concurrent", "0"},
		"log-level":      {"watch", "--log-level", "loud"},
		"log-format":     {"watch", "--log-format", "xml"},
		"--max-delay":    {"watch", "--initial-delay", "10s", "--max-delay", "1s"},
		"idle-interval":  {"watch", "--idle-interval", "0s"},
		"unknown flag":   {"watch", "--nope"},
	}
	for want, args := range cases {
		code, _, errOut := runCLI(t, args...)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("%v: exit %d, stderr %q, want it to name %q", args, code, errOut, want)
		}
	}
	// A log setting that is refused makes no log file.
	logFile := filepath.Join(t.TempDir(), "logs", "w.log")
	if code, _, _ := runCLI(t, "watch", "--log-file", logFile, "--log-format", "xml"); code == 0 {
		t.Fatal("--log-format xml was taken")
	}
	if _, err := os.Stat(filepath.Dir(logFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused --log-format made %s (%v)", filepath.Dir(logFile), err)
	}
}

func TestPasswordNeverEchoed(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_PASSWORD", "hunter2-secret")
	t.Setenv("MCP_RECONNECT_JITTER", "bad")
	_, out, errOut := runCLI(t, "watch")
	if strings.Contains(out+errOut, "hunter2") {
		t.Fatal("the password was printed")
	}
}

func TestStatusWithoutDaemon(t *testing.T) {
	code, _, errOut := runCLI(t, "status", "--status-addr", "127.0.0.1:1")
	if code == 0 || !strings.Contains(errOut, "mcp-reconnect watch") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestMain keeps the user's own config file and state out of these tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpr-cmd-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
