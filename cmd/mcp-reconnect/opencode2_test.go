package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The background watch `run` starts for the OpenCode 2 service inherits
// no OpenCode URL, user or password (one meant for another server must
// not reach the service), is not this process's child (run execs into
// the TUI next, which would never reap it), and has run's --directory
// directories as its own.
func TestServiceWatchIsScrubbedAndDetached(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "mcp-reconnect")
	out := filepath.Join(dir, "out")
	script := "#!/bin/sh\n{ echo \"ppid=$PPID\"; echo \"args=$*\"; env; } > " + out + ".tmp\nmv " + out + ".tmp " + out + "\n"
	if err := os.WriteFile(self, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, k := range scrubbed {
		t.Setenv(k, "leaked-"+k)
	}
	t.Setenv("MCP_RECONNECT_KEPT", "kept")
	if err := spawnServiceWatch(self, "/svc/service.json", "/logs/run.log", "", []string{"/p1", "/p2"})(); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for deadline := time.Now().Add(5 * time.Second); len(b) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ = os.ReadFile(out)
	}
	got := string(b)
	if !strings.Contains(got, "args=watch --service-file /svc/service.json --status-addr 127.0.0.1:0 --log-file /logs/run.log --directory /p1 --directory /p2\n") {
		t.Fatalf("the watch ran as:\n%s", got)
	}
	for _, k := range scrubbed {
		if strings.Contains(got, "\n"+k+"=") {
			t.Errorf("$%s reached the background watch", k)
		}
	}
	if !strings.Contains(got, "\nMCP_RECONNECT_KEPT=kept\n") {
		t.Errorf("the rest of the environment did not reach it:\n%s", got)
	}
	if strings.Contains(got, "ppid="+strconv.Itoa(os.Getpid())+"\n") {
		t.Errorf("the background watch is this process's child: the TUI it execs into would never reap it")
	}
}

// `watch` with no URL and no password (the command line `service install`
// writes, run at login, before OpenCode 2's service has started) follows
// the service file although it does not exist yet: the service writes it
// when it starts. The one server starts at the 1.x default, watched while
// no service runs, and is registered as following the service file, so
// `run` counts it as watching the service.
func TestWatchFollowsTheServiceFileBeforeItExists(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	for _, k := range []string{"OPENCODE_URL", "OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME", "MCP_RECONNECT_SERVICE_FILE", "MCP_RECONNECT_CONFIG"} {
		t.Setenv(k, "")
	}
	f, fs := loadFlags(t)
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Discover == nil || got[0].ServiceFile != defaultServiceFile() || got[0].URL != defaultURL {
		t.Fatalf("servers = %+v: want one that follows %s, first at %s", got, defaultServiceFile(), defaultURL)
	}
	// A URL given: that server, no service.
	f, fs = loadFlags(t, "--url", "http://127.0.0.1:5000")
	got, _ = f.servers(fs, slog.New(slog.DiscardHandler))
	if len(got) != 1 || got[0].Discover != nil {
		t.Fatalf("with --url: servers = %+v", got)
	}
}
