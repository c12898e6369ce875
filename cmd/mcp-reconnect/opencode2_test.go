package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The background watch `run` starts for the OpenCode 2 service inherits
// no OpenCode URL, user or password (one meant for another server must
// not reach the service), and is not this process's child (run execs into
// the TUI next, which would never reap it).
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
	if err := spawnServiceWatch(self, "/svc/service.json", "/logs/run.log", "")(); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for deadline := time.Now().Add(5 * time.Second); len(b) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ = os.ReadFile(out)
	}
	got := string(b)
	if !strings.Contains(got, "args=watch --service-file /svc/service.json --status-addr 127.0.0.1:0 --log-file /logs/run.log\n") {
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
