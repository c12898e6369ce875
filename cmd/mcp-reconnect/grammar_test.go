package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A subcommand of the binary that 1.18 does not have (here "share", as a
// later release might add) is read from the binary's own --help, once
// (remembered), and passed through untouched: no --port, no wait for a
// server that never comes. A word its grammar does not know is the TUI's
// project, and gets its port. A subcommand 1.18 has costs no --help.
func TestRunReadsTheBinarysGrammar(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcp-reconnect")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	// As npm installs it: bin/opencode links into a node_modules tree.
	mods := filepath.Join(dir, "lib", "node_modules")
	real := filepath.Join(mods, "opencode-ai", "bin", "opencode")
	oc := filepath.Join(dir, "bin", "opencode")
	for _, d := range []string{filepath.Dir(real), filepath.Dir(oc)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mods, ".package-lock.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
case "$1" in
--version) echo 1.19.0; exit 0;;
--help) echo help >> ` + dir + `/helped
  printf 'Commands:\n  opencode share [id]   share a session\n  opencode serve        starts a headless opencode server\n  opencode models       list models\n  opencode [project]    start opencode tui  [default]\n\nOptions:\n  --port  port to listen on  [number]\n' >&2
  exit 0;;
esac
echo "ARGS: $*" >> ` + dir + `/args
exit 0
`
	if err := os.WriteFile(real, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, oc); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := append(cleanEnv(), "PATH="+os.Getenv("PATH"), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	runOC := func(args ...string) (string, time.Duration) {
		t.Helper()
		_ = os.Remove(filepath.Join(dir, "args"))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"run", "--log-file", filepath.Join(dir, "run.log"), "--status-addr", "127.0.0.1:0", "--start-timeout", "20s", "--", oc}, args...)...)
		cmd.Env = env
		start := time.Now()
		out, _ := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("run -- opencode %v did not end:\n%s", args, out)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "args"))
		return strings.TrimSpace(string(b)), time.Since(start)
	}
	helped := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "helped"))
		return strings.Count(string(b), "help")
	}

	if got, took := runOC("share", "ses_1"); got != "ARGS: share ses_1" || took > 15*time.Second {
		t.Fatalf("share: %q after %v; want it passed through untouched, at once", got, took)
	}
	if n := helped(); n != 1 {
		t.Fatalf("--help asked %d times, want 1", n)
	}
	if got, _ := runOC("share"); got != "ARGS: share" || helped() != 1 {
		t.Fatalf("share again: %q, --help asked %d times; want it remembered", got, helped())
	}
	if got, _ := runOC("shop"); !strings.HasPrefix(got, "ARGS: shop --port ") {
		t.Fatalf("shop (a project): %q, want the TUI with a port", got)
	}
	if got, _ := runOC("models"); got != "ARGS: models" {
		t.Fatalf("models: %q", got)
	}
	if n := helped(); n != 1 {
		t.Fatalf("--help asked %d times in all, want 1", n)
	}
}
