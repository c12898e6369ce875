package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/launch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// helperOpenCode writes an "opencode" script that runs this test binary
// as TestHelperOpenCode on the --port it is given, for life; it returns
// the script and the environment to run it.
func helperOpenCode(t *testing.T, life time.Duration) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "opencode")
	body := "#!/bin/sh\nwhile [ $# -gt 0 ]; do case \"$1\" in --port) HELPER_PORT=$2; export HELPER_PORT; shift;; esac; shift; done\n" +
		"exec \"$HELPER_TESTBIN\" -test.run='^TestHelperOpenCode$' -test.count=1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HELPER_OPENCODE=1", "HELPER_TESTBIN="+exe, "HELPER_LIFE="+life.String(),
		"OPENCODE_SERVER_USERNAME=", "OPENCODE_SERVER_PASSWORD=", "OPENCODE_PASSWORD=")
	return script, env
}

// TestHelperOpenCode is the child of the tests here: the 1.x fake with
// OpenCode 1.x's auth rules (user OPENCODE_SERVER_USERNAME, default
// "opencode"; password OPENCODE_SERVER_PASSWORD).
func TestHelperOpenCode(t *testing.T) {
	if os.Getenv("HELPER_OPENCODE") == "" {
		t.Skip("helper process only")
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("HELPER_PORT"))
	if err != nil {
		os.Exit(3)
	}
	user := os.Getenv("OPENCODE_SERVER_USERNAME")
	if user == "" {
		user = "opencode"
	}
	h := fakeopencode.New(nil)
	h.Username, h.Password = user, os.Getenv("OPENCODE_SERVER_PASSWORD")
	go func() { _ = http.Serve(l, h) }()
	life, _ := time.ParseDuration(os.Getenv("HELPER_LIFE"))
	time.Sleep(life)
	os.Exit(0)
}

// `run --username bob` (or `username` in the config file) makes the
// daemon authenticate as bob, so the child must expect bob: without it
// OpenCode keeps its default user, answers every health poll 401, and the
// wrapper kills the user's OpenCode at --start-timeout.
func TestManagedChildGetsTheUsername(t *testing.T) {
	script, env := helperOpenCode(t, 2*time.Second)
	plan, err := launch.NewPlan([]string{script, "serve"}, env, launch.Credentials{Username: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Engine: reconnect.DefaultConfig, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := Managed(context.Background(), plan, cfg, 1500*time.Millisecond, slog.New(slog.DiscardHandler))
		done <- result{code, err}
	}()
	// The child answers bob, as the daemon asks.
	status := 0
	for deadline := time.Now().Add(1500 * time.Millisecond); status != http.StatusOK && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("GET", plan.URL+"/global/health", nil)
		req.SetBasicAuth("bob", plan.Password)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
	}
	r := <-done
	if status != http.StatusOK || r.err != nil {
		l, _, _ := strings.Cut(fmt.Sprint(r.err), "\n")
		t.Fatalf("the child answered %d to bob; Managed: exit %d, %s\n(the child must expect the user the daemon asks as)", status, r.code, l)
	}
}
