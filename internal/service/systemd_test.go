package service

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// systemdAnalyze finds systemd-analyze, failing under CI=true when it is
// missing (the unit must be checked there), skipping elsewhere.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("systemd-analyze not found under CI=true (apt-get install systemd): %v", err)
		}
		t.Skipf("systemd-analyze not found: %v", err)
	}
	return p
}

// verifyUnit runs `systemd-analyze --user verify` on content saved as
// mcp-reconnect.service, with a private XDG_RUNTIME_DIR so it needs no
// running user manager, and returns its output and error. verify exits 0
// for some problems (an unknown key, a bad Restart= value) and only says
// so on stderr, so callers require empty output too.
func verifyUnit(t *testing.T, content []byte) (string, error) {
	t.Helper()
	bin := systemdAnalyze(t)
	dir := t.TempDir()
	unit := filepath.Join(dir, UnitName)
	if err := os.WriteFile(unit, content, 0o644); err != nil {
		t.Fatal(err)
	}
	runtime := filepath.Join(dir, "runtime")
	if err := os.Mkdir(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--user", "verify", unit)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime, "SYSTEMD_LOG_COLOR=0")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestUnitPassesSystemdAnalyzeVerify renders the unit for a binary and a
// config file in directories whose names need quoting (space, "%"
// specifier, "$" variable; quote and backslash in the config's) and has
// systemd
// itself check it: verify fails when the executable named by ExecStart
// does not exist after unquoting, and warns about unknown keys, bad values
// and unescaped specifiers.
func TestUnitPassesSystemdAnalyzeVerify(t *testing.T) {
	vars := map[string]string{}
	env, _ := testEnv(t, vars)
	odd := filepath.Join(t.TempDir(), `bin dir %h $HOME`)
	if err := os.MkdirAll(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(odd, "mcp-reconnect")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	vars["XDG_STATE_HOME"] = filepath.Join(odd, "state")
	vars["XDG_CONFIG_HOME"] = filepath.Join(odd, "config")
	m := mustNew(t, env)
	pl, err := m.Plan(Spec{Binary: bin, Config: filepath.Join(odd, `c $x "q" back\slash.toml`)}, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	unit := pl.Files[0]
	if unit.Path != m.p.path() || !strings.HasSuffix(unit.Path, "/config/systemd/user/mcp-reconnect.service") {
		t.Fatalf("unit path %s", unit.Path)
	}
	if out, err := verifyUnit(t, unit.Content); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s\n--- unit:\n%s", err, out, unit.Content)
	}
	for _, want := range []string{"Restart=on-failure\n", "RestartSec=5\n", "RestartPreventExitStatus=78\n", "WantedBy=default.target\n", "EnvironmentFile=-" + strings.ReplaceAll(filepath.Join(odd, "config", "mcp-reconnect", "env"), "%", "%%") + "\n"} {
		if !bytes.Contains(unit.Content, []byte(want)) {
			t.Errorf("unit lacks %q:\n%s", want, unit.Content)
		}
	}
}

// systemd refuses to run an executable whose path holds a quote or a
// backslash ("Executable name contains special characters"): install says
// so instead of writing a unit that never starts.
func TestUnitRefusesABinarySystemdWillNotRun(t *testing.T) {
	env, _ := testEnv(t, nil)
	for _, bin := range []string{`/opt/a"b/mcp-reconnect`, `/opt/a\b/mcp-reconnect`, `/opt/it's/mcp-reconnect`} {
		if _, err := mustNew(t, env).Plan(Spec{Binary: bin}, "t", time.Now()); err == nil || !strings.Contains(err.Error(), "plain path") {
			t.Errorf("%s: %v", bin, err)
		}
	}
}

// The check above is not vacuous: verify here does reject a unit whose
// ExecStart names a missing binary, and reports a bad value on stderr.
func TestSystemdAnalyzeVerifyCatchesMistakes(t *testing.T) {
	env, _ := testEnv(t, nil)
	f, err := mustNew(t, env).p.render(Spec{Binary: "/nonexistent/mcp-reconnect"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := verifyUnit(t, f.Content); err == nil && out == "" {
		t.Fatal("verify accepted a unit with a missing binary")
	}
	good, err := mustNew(t, env).p.render(Spec{Binary: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := verifyUnit(t, good.Content); err != nil || out != "" {
		t.Fatalf("verify on /bin/sh: %v %s", err, out)
	}
	bad := bytes.Replace(good.Content, []byte("Restart=on-failure"), []byte("Restart=sometimes"), 1)
	if out, _ := verifyUnit(t, bad); out == "" {
		t.Fatal("verify said nothing about Restart=sometimes")
	}
	unquoted := bytes.Replace(good.Content, []byte(`"/bin/sh"`), []byte(`/bin/%c`), 1)
	if out, _ := verifyUnit(t, unquoted); out == "" {
		t.Fatal("verify said nothing about an unescaped specifier")
	}
}

// FuzzUnitLines: whatever the paths, the unit has exactly the lines the
// renderer writes (no path adds a directive), or the paths are refused.
func FuzzUnitLines(f *testing.F) {
	f.Add("/usr/bin/mcp-reconnect", "", "/home/u/.local/state")
	f.Add("/a b/%h/$X", "/c\"\\.toml", "/s t")
	f.Add("/x\nExecStartPre=/bin/evil", "", "")
	f.Fuzz(func(t *testing.T, bin, config, state string) {
		vars := map[string]string{"XDG_STATE_HOME": state}
		env := Env{GOOS: "linux", Home: "/home/u", Getenv: func(k string) string { return vars[k] }}
		m, err := New(env)
		if err != nil {
			t.Fatal(err)
		}
		spec := Spec{Binary: bin, Config: config}
		if spec.validate() != nil {
			return
		}
		file, err := m.p.render(spec)
		if err != nil {
			return
		}
		// The line count depends on nothing but how many XDG variables
		// are pinned, which a plain spec shows.
		plain, err := m.p.render(Spec{Binary: "/b"})
		if err != nil {
			t.Fatal(err)
		}
		wantLines := bytes.Count(plain.Content, []byte("\n"))
		if n := bytes.Count(file.Content, []byte("\n")); n != wantLines {
			t.Fatalf("%d lines, want %d:\n%s", n, wantLines, file.Content)
		}
		for _, line := range strings.Split(string(file.Content), "\n") {
			if strings.HasPrefix(line, "ExecStart") && !strings.HasPrefix(line, "ExecStart=\"") {
				t.Fatalf("ExecStart line %q", line)
			}
		}
	})
}

// A daemon refused as a duplicate exits ExitDuplicate, which the unit
// lists in RestartPreventExitStatus=: systemd leaves it stopped instead
// of starting it (to be refused again) every RestartSec for ever. verify
// accepts the directive (TestUnitPassesSystemdAnalyzeVerify); here, one
// line of it, naming exactly that status, under [Service].
func TestUnitDoesNotRestartARefusedDuplicate(t *testing.T) {
	env, _ := testEnv(t, nil)
	f, err := mustNew(t, env).p.render(Spec{Binary: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	section, found := "", 0
	for _, line := range strings.Split(string(f.Content), "\n") {
		if strings.HasPrefix(line, "[") {
			section = line
		}
		if v, ok := strings.CutPrefix(line, "RestartPreventExitStatus="); ok {
			found++
			if section != "[Service]" || v != strconv.Itoa(ExitDuplicate) {
				t.Errorf("%q in %s, want RestartPreventExitStatus=%d in [Service]", line, section, ExitDuplicate)
			}
		}
	}
	if found != 1 {
		t.Fatalf("%d RestartPreventExitStatus= lines, want 1:\n%s", found, f.Content)
	}
	if ExitDuplicate == 0 || ExitDuplicate == 1 {
		t.Fatalf("ExitDuplicate %d is not a status of its own", ExitDuplicate)
	}
}
