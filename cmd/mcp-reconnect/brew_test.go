package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A daemon `brew services` keeps on is reported by `service status` (which
// then exits 0: the daemon runs), and `service install` refuses to start a
// second one beside it.
func TestServiceSeesBrewServices(t *testing.T) {
	home := serviceHome(t)
	unit := filepath.Join(home, ".config", "systemd", "user", "homebrew.mcp-reconnect.service")
	if err := os.MkdirAll(filepath.Dir(unit), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unit, []byte("[Service]\nExecStart=/home/linuxbrew/.linuxbrew/opt/mcp-reconnect/bin/mcp-reconnect watch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// systemctl as brew services left it: Homebrew's unit runs, ours
	// does not exist.
	bin := filepath.Join(home, "fakebin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
case "$*" in
*homebrew.mcp-reconnect.service*) printf 'LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=0\nUnitFileState=enabled\n' ;;
*) printf 'LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\nNRestarts=0\nUnitFileState=\n' ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	code, out, errOut := runCLI(t, "service", "status", "--platform", "systemd")
	if code != 0 || !strings.Contains(out, "homebrew:  brew services keeps mcp-reconnect on ("+unit+"): active (running), pid 4242") {
		t.Fatalf("service status: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "service", "install", "--dry-run", "--platform", "systemd")
	if code == 0 || !strings.Contains(errOut, "brew services stop mcp-reconnect") || strings.Contains(out, "would write") {
		t.Fatalf("service install beside brew services: exit %d\n%s%s", code, out, errOut)
	}
}
