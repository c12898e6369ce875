//go:build linux

package procview

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run the real npx and npm (node's), offline, on a local
// package whose bin sleeps. Without npx they skip, except under CI=true,
// where they fail.

// npxPackage writes a local package whose bin sleeps, so npx needs no
// network, and returns the directory holding it (as ./pkg) and npx's
// environment.
func npxPackage(t *testing.T) (dir string, env []string) {
	t.Helper()
	if _, err := exec.LookPath("npx"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("npx missing under CI: install node and npm: %v", err)
		}
		t.Skip("no npx")
	}
	dir = t.TempDir()
	pkg := filepath.Join(dir, "pkg")
	must(t, os.MkdirAll(pkg, 0o755))
	must(t, os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name":"fake-mcp","version":"1.0.0","bin":{"fake-mcp":"index.js"}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(pkg, "index.js"), []byte("#!/usr/bin/env node\nsetTimeout(()=>{},60000)\n"), 0o755))
	env = append(os.Environ(), "npm_config_cache="+t.TempDir(), "npm_config_offline=true", "npm_config_update_notifier=false")
	return dir, env
}

// startNpx starts command in dir as this test's child, in its own
// process group, killed with it at the end of the test.
func startNpx(t *testing.T, dir string, env []string, command []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

// waitTitle waits until npm has set its full title (what a 2 s scan sees
// for all but the first half second of the server's life) and returns it.
func waitTitle(t *testing.T, pid int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bytes.HasPrefix(b, []byte("npm ")) {
			return string(bytes.TrimRight(b, "\x00"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("npm %d never set its title", pid)
	return ""
}

// npxCommand is the configured command (as in opencode.json).
var npxCommand = []string{"npx", "-y", "./pkg"}

// The most common local MCP config, `npx -y PACKAGE`: npm retitles its
// process ("npm exec ./pkg", one NUL-padded word), and the view still
// finds the child serving the server, so its exit is reported.
func TestViewMatchesAServerStartedThroughNpx(t *testing.T) {
	dir, env := npxPackage(t)
	cmd := startNpx(t, dir, env, npxCommand)
	t.Logf("npx's title: %q", waitTitle(t, cmd.Process.Pid))

	tab, err := System()
	must(t, err)
	v, err := NewView(tab, os.Getpid()) // this test is "OpenCode": npx is its child
	must(t, err)
	key := Key{dir, "fake"}
	v.SetServers([]LocalServer{{Directory: dir, Name: "fake", Command: npxCommand}})
	s, err := v.Scan()
	must(t, err)
	if c, ok := s.Child(key); !ok || c.PID != cmd.Process.Pid {
		var others []string
		for _, o := range s.Others {
			others = append(others, fmt.Sprintf("%d %s", o.PID, o.Command()))
		}
		t.Fatalf("the npx child %d serves no server in the view (others: %v): its exit would never be reported", cmd.Process.Pid, others)
	}
	c, _ := s.Child(key)
	if got := c.Command(); got != "npm exec ./pkg" {
		t.Errorf("the child is shown as %q, want npm exec ./pkg", got)
	}
	launcher, err := tab.Read(cmd.Process.Pid)
	must(t, err)
	var srv Process
	deadline := time.Now().Add(30 * time.Second)
	for {
		srv, _, err = ServerProcess(tab, launcher)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // npm still starting its bin
	}
	must(t, err)
	if len(srv.Argv) < 2 || filepath.Base(srv.Argv[0]) != "node" || filepath.Base(srv.Argv[1]) != "fake-mcp" || srv.Cwd != launcher.Cwd {
		t.Fatalf("ServerProcess gave %d %q in %q, want node …/.bin/fake-mcp in %q", srv.PID, srv.Argv, srv.Cwd, launcher.Cwd)
	}
}

// The titles procview expects for a configured npx or npm command hold
// the one npm sets, option by option.
func TestNpmTitleIsWhatNpmSets(t *testing.T) {
	dir, env := npxPackage(t)
	commands := [][]string{
		{"npx", "-y", "./pkg", "arg1", "--flag", "x"},
		{"npx", "--yes", "./pkg", "sp ace", "z"},
		{"npx", "-p", "./pkg", "fake-mcp", "a"},
		{"npx", "-y", "--", "./pkg", "c"},
		{"npx", "--prefer-offline", "./pkg", "e"},
		{"npx", "--registry", "http://127.0.0.1:9/", "-y", "./pkg", "g"},
		{"npx", "-y", "./pkg", "--token", "123e4567-e89b-12d3-a456-426614174000", "https://u:pw@example.com/x", "--key=npm_abcdefghijklmnopqrstuvwxyz0123456789AB"},
		{"npm", "exec", "--package=./pkg", "--", "fake-mcp", "q"},
		{"npm", "exec", "-y", "./pkg", "--flag", "x"},
		{"npm", "--prefix", ".", "exec", "--yes", "--", "./pkg", "--loglevel", "h"},
	}
	var wg sync.WaitGroup
	got := make([]string, len(commands))
	for i, c := range commands {
		cmd := startNpx(t, dir, env, c)
		wg.Go(func() {
			got[i] = waitTitle(t, cmd.Process.Pid)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // free the two cores for the others
		})
	}
	wg.Wait()
	for i, c := range commands {
		l, ok := parseLaunch(c)
		if !ok || !slices.Contains(l.titles, got[i]) {
			t.Errorf("%q: npm's title is %q, procview expects one of %q", c, got[i], l.titles)
		}
	}
}
