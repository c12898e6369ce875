package main

import (
	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
	"log/slog"
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
	oldDirs := systemUnitDirs
	systemUnitDirs = []string{filepath.Join(home, "usr-lib-systemd-user")}
	t.Cleanup(func() { executable, systemUnitDirs = old, oldDirs })
	return home
}

// A unit the .deb or .rpm installed for every user is the service when the
// user has none of their own: status names it, says what systemd says of
// it, and exits 0 while it runs.
func TestServiceStatusSeesThePackagesUnit(t *testing.T) {
	home := serviceHome(t)
	dir := systemUnitDirs[0]
	unit, err := service.PackageUnit("/usr/bin/mcp-reconnect")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, service.UnitName), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	// systemctl as after `systemctl --user enable --now mcp-reconnect`.
	bin := filepath.Join(home, "fakebin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
case "$*" in
*" mcp-reconnect.service"*) printf 'LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=0\nUnitFileState=enabled\n' ;;
*) printf 'LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\nNRestarts=0\nUnitFileState=\n' ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	code, out, errOut := runCLI(t, "service", "status")
	if code != 0 || !strings.Contains(out, "installed: for every user, by the mcp-reconnect package: "+filepath.Join(dir, service.UnitName)) ||
		!strings.Contains(out, "running:   active (running), pid 4242") {
		t.Fatalf("service status: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "service", "status", "--json")
	if code != 0 || !strings.Contains(out, `"system_unit": "`+filepath.Join(dir, service.UnitName)+`"`) {
		t.Fatalf("service status --json: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "service", "install", "--dry-run")
	if code != 0 || !strings.Contains(errOut, "takes its place for you") || !strings.Contains(out, "would write") {
		t.Fatalf("service install beside the package's unit: exit %d\n%s%s", code, out, errOut)
	}
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
	code, out, errOut = runCLI(t, "service", "install", "--dry-run", "--config", cfg)
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
	code, out, errOut := runCLI(t, "service", "install", "--dry-run")
	if code == 0 || !strings.Contains(errOut, "chmod 600 "+ef) || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// install "checks the config file as watch would read it" so it
// does not start a service that can only fail, but checkServiceConfig
// skips the [[opencode]] tables: a password-file others can read (which
// watch refuses at every start, so systemd restarts it every 5 s forever)
// passes install, and so does an [[opencode]] table with an unknown key.
func TestServiceInstallChecksPasswordFiles(t *testing.T) {
	home := serviceHome(t)
	pw := filepath.Join(home, "work.pw")
	if err := os.WriteFile(pw, []byte("hunter2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, "c.toml")
	if err := os.WriteFile(cfg, []byte("[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npassword-file = \""+pw+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "chmod 600 "+pw) {
		t.Fatalf("install accepted a config whose password-file others can read (watch will refuse it at every start): exit %d\n%s%s", code, out, errOut)
	}
}

func TestServiceInstallChecksServerTables(t *testing.T) {
	home := serviceHome(t)
	cfg := filepath.Join(home, "c.toml")
	if err := os.WriteFile(cfg, []byte("[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npasword-file = \"/x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "pasword-file") {
		t.Fatalf("install accepted an [[opencode]] table watch refuses: exit %d\n%s%s", code, out, errOut)
	}
}

// What watch refuses of the servers the config file names, install
// refuses first: here a password sent over plain http to another host.
func TestServiceInstallRefusesWhatWatchRefusesOfTheServers(t *testing.T) {
	home := serviceHome(t)
	cfg := filepath.Join(home, "c.toml")
	if err := os.WriteFile(cfg, []byte("url = \"http://10.1.2.3:4096\"\npassword = \"hunter2\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "plain http to another host") || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("install accepted a config watch refuses at every start: exit %d\n%s%s", code, out, errOut)
	}
}

// The OpenCode 2 service is "one more entry", but the "listed
// twice" check skips it. A config that also lists the service's URL in an
// [[opencode]] table (the user knows its port) gives two engines for one
// server: two loops check the same directory concurrently (rule 7), each
// with its own counters (double the connects), and both report under one
// metrics label, overwriting each other's gauges.
func TestServiceAlsoListedIsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "service.json")
	svc := `{"id":"x","version":"2.0.0","url":"http://127.0.0.1:49374","pid":1,"password":"svc-pw"}`
	if err := os.WriteFile(file, []byte(svc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://127.0.0.1:49374\"\n")
	f, fs := loadFlags(t, "--config", cfg, "--service-file", file)
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("servers = %+v, %v: the service's URL is watched twice", got, err)
	}
}
