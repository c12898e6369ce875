package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serviceHome is a hermetic home and a stand-in binary outside go-build.
func serviceHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, ".local", "state"))
	bin := filepath.Join(home, "bin", "mcp-reconnect")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := executable
	executable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { executable = old })
	return home
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error { out = append(out, p); return nil })
	return out
}

func TestServiceInstallRefusesAPassword(t *testing.T) {
	home := serviceHome(t)
	before := entries(t, home)
	code, out, errOut := runCLI(t, "service", "install", "--password=hunter2", "--dry-run")
	if code == 0 || !strings.Contains(errOut, "takes no --password") || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if after := entries(t, home); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("wrote %q", after)
	}
}

// A config file holding a password that others can read would make the
// service fail at every start: install says so first.
func TestServiceInstallChecksTheConfigFile(t *testing.T) {
	home := serviceHome(t)
	cfg := filepath.Join(home, "c.toml")
	if err := os.WriteFile(cfg, []byte("password = \"hunter2\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "chmod 600") || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if err := os.Chmod(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "service", "install", "--dry-run", "--platform", "systemd", "--config", cfg)
	if code != 0 || !strings.Contains(out, `"watch" "--config" "`+cfg+`"`) || strings.Contains(out, "hunter2") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "service", "install", "--dry-run", "--config", filepath.Join(home, "missing.toml"))
	if code == 0 || !strings.Contains(errOut, "missing.toml") {
		t.Fatalf("missing config: exit %d %s", code, errOut)
	}
}

func TestServiceInstallRefusesAGoRunBinary(t *testing.T) {
	serviceHome(t)
	executable = func() (string, error) { return "/tmp/go-build123/b001/exe/mcp-reconnect", nil }
	code, _, errOut := runCLI(t, "service", "install", "--dry-run")
	if code == 0 || !strings.Contains(errOut, "temporary build") {
		t.Fatalf("exit %d %s", code, errOut)
	}
}

func TestServiceEnvFileMustBePrivate(t *testing.T) {
	home := serviceHome(t)
	ef := filepath.Join(home, ".config", "mcp-reconnect", "env")
	if err := os.MkdirAll(filepath.Dir(ef), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ef, []byte("OPENCODE_SERVER_PASSWORD=hunter2\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--platform", "systemd")
	if code == 0 || !strings.Contains(errOut, "chmod 600 "+ef) || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
