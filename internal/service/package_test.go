package service

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withoutUserLines drops what PackageUnit leaves out of install's unit,
// or puts in its place: comments, the environment file, pinned variables.
func withoutUserLines(unit []byte) string {
	var keep []string
	for _, line := range strings.Split(string(unit), "\n") {
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "EnvironmentFile=") || strings.HasPrefix(line, "Environment=") {
			continue
		}
		if i := strings.Index(line, ` "--service-env-file" `); strings.HasPrefix(line, "ExecStart=") && i > 0 {
			line = line[:i] + ` "--service-env-file" ENVFILE` // the same file, named per user
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

// The packages' unit is install's for the same binary, minus what is one
// user's: no XDG variable pinned, the environment file found per user
// (%E is $XDG_CONFIG_HOME, ~/.config by default), and no Marker, so
// neither install nor uninstall takes it for theirs.
func TestPackageUnitIsInstallsWithoutTheUser(t *testing.T) {
	vars := map[string]string{}
	env, _ := testEnv(t, vars)
	vars["XDG_CONFIG_HOME"] = filepath.Join(env.Home, "cfg")
	vars["XDG_STATE_HOME"] = filepath.Join(env.Home, "state")
	users, err := mustNew(t, env).p.render(Spec{Binary: "/usr/bin/mcp-reconnect"})
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := PackageUnit("/usr/bin/mcp-reconnect")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := withoutUserLines(users.Content), withoutUserLines(pkg); a != b {
		t.Errorf("the units differ beyond the user's lines:\n--- install:\n%s\n--- package:\n%s", a, b)
	}
	text := string(pkg)
	for _, want := range []string{"ExecStart=\"/usr/bin/mcp-reconnect\" \"watch\" \"--service-env-file\" \"%E/mcp-reconnect/env\"\n", "EnvironmentFile=-%E/mcp-reconnect/env\n", "WantedBy=default.target\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the package's unit lacks %q:\n%s", want, text)
		}
	}
	for _, bad := range []string{Marker, "Environment=", env.Home} {
		if strings.Contains(text, bad) {
			t.Errorf("the package's unit holds %q:\n%s", bad, text)
		}
	}
	if _, err := PackageUnit("usr/bin/mcp-reconnect"); err == nil {
		t.Error("a relative binary was accepted")
	}
}

// systemd reads the packages' unit as meant: %E is a specifier it knows
// (verify warns about unknown ones), and ExecStart names a binary that
// exists.
func TestPackageUnitPassesSystemdAnalyzeVerify(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mcp-reconnect")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit, err := PackageUnit(bin)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := verifyUnit(t, unit); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s\n--- unit:\n%s", err, out, unit)
	}
}

// status sees the unit a package installed for every user: not as the
// user's own (installed stays about the file install writes), but named,
// with what systemd says of it; and once install wrote the user's, which
// takes its place, both.
func TestStatusSeesThePackagesUnit(t *testing.T) {
	env, r := testEnv(t, nil)
	r.answer = func(argv []string) ([]byte, error) {
		if argv[2] == "show" {
			return []byte("LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=0\nUnitFileState=enabled\n"), nil
		}
		return nil, nil
	}
	m := mustNew(t, env)
	rep, err := m.Status(context.Background(), "/usr/bin/mcp-reconnect")
	if err != nil || rep.Installed || rep.SystemUnit != "" {
		t.Fatalf("with no unit anywhere: %+v %v", rep, err)
	}
	unit, err := PackageUnit("/usr/bin/mcp-reconnect")
	if err != nil {
		t.Fatal(err)
	}
	pkgDir := env.SystemUnitDirs[len(env.SystemUnitDirs)-1]
	if err := os.MkdirAll(pkgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	pkgUnit := filepath.Join(pkgDir, UnitName)
	if err := os.WriteFile(pkgUnit, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = m.Status(context.Background(), "/usr/bin/mcp-reconnect")
	if err != nil || rep.Installed || rep.SystemUnit != pkgUnit || rep.Running == nil || !rep.Running.Active || rep.Running.PID != 4242 {
		t.Fatalf("with the package's unit: %+v %v", rep, err)
	}
	// The administrator's directory comes first, as systemd reads it.
	etc := env.SystemUnitDirs[0]
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, UnitName), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, _ = m.Status(context.Background(), "/usr/bin/mcp-reconnect"); rep.SystemUnit != filepath.Join(etc, UnitName) {
		t.Fatalf("with /etc's too: %+v", rep)
	}
	if err := os.Remove(filepath.Join(etc, UnitName)); err != nil {
		t.Fatal(err)
	}
	// Install's own unit is the user's; the package's stays named.
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	if rep, _ = m.Status(context.Background(), "/usr/bin/mcp-reconnect"); !rep.Installed || !rep.Current || rep.SystemUnit != pkgUnit {
		t.Fatalf("after install: %+v", rep)
	}
	// Uninstall removes the user's and leaves the package's alone.
	if _, err := m.Uninstall(context.Background(), &strings.Builder{}, false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(pkgUnit); err != nil || string(b) != string(unit) {
		t.Fatalf("uninstall touched the package's unit: %v", err)
	}
	if rep, _ = m.Status(context.Background(), "/usr/bin/mcp-reconnect"); rep.Installed || rep.SystemUnit != pkgUnit {
		t.Fatalf("after uninstall: %+v", rep)
	}
}
