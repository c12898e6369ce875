package service

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
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
	plan, err := dryRun(m, Spec{Binary: bin, Config: filepath.Join(odd, `c $x "q" back\slash.toml`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(odd, "config/systemd/user/mcp-reconnect.service"); m.Path() != want || !strings.Contains(plan, "would write "+want+" (mode 0644)") {
		t.Fatalf("unit path %s, want %s:\n%s", m.Path(), want, plan)
	}
	unit, err := m.render(Spec{Binary: bin, Config: filepath.Join(odd, `c $x "q" back\slash.toml`)})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := verifyUnit(t, unit); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s\n--- unit:\n%s", err, out, unit)
	}
	for _, want := range []string{"Restart=on-failure\n", "RestartSec=5\n", "RestartPreventExitStatus=78\n", "WantedBy=default.target\n", "EnvironmentFile=-" + strings.ReplaceAll(filepath.Join(odd, "config", "mcp-reconnect", "env"), "%", "%%") + "\n"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
}

// systemd refuses to run an executable whose path holds a quote or a
// backslash ("Executable name contains special characters"): install says
// so instead of writing a unit that never starts.
func TestUnitRefusesABinarySystemdWillNotRun(t *testing.T) {
	env, _ := testEnv(t, nil)
	for _, bin := range []string{`/opt/a"b/mcp-reconnect`, `/opt/a\b/mcp-reconnect`, `/opt/it's/mcp-reconnect`} {
		if _, err := dryRun(mustNew(t, env), Spec{Binary: bin}); err == nil || !strings.Contains(err.Error(), "plain path") {
			t.Errorf("%s: %v", bin, err)
		}
	}
}

// The check above is not vacuous: verify here does reject a unit whose
// ExecStart names a missing binary, and reports a bad value on stderr.
func TestSystemdAnalyzeVerifyCatchesMistakes(t *testing.T) {
	env, _ := testEnv(t, nil)
	f, err := mustNew(t, env).render(Spec{Binary: "/nonexistent/mcp-reconnect"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := verifyUnit(t, f); err == nil && out == "" {
		t.Fatal("verify accepted a unit with a missing binary")
	}
	good, err := mustNew(t, env).render(Spec{Binary: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := verifyUnit(t, good); err != nil || out != "" {
		t.Fatalf("verify on /bin/sh: %v %s", err, out)
	}
	bad := bytes.Replace(good, []byte("Restart=on-failure"), []byte("Restart=sometimes"), 1)
	if out, _ := verifyUnit(t, bad); out == "" {
		t.Fatal("verify said nothing about Restart=sometimes")
	}
	unquoted := bytes.Replace(good, []byte(`"/bin/sh"`), []byte(`/bin/%c`), 1)
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
		file, err := m.render(spec)
		if err != nil {
			return
		}
		// The line count depends on nothing but how many XDG variables
		// are pinned, which a plain spec shows.
		plain, err := m.render(Spec{Binary: "/b"})
		if err != nil {
			t.Fatal(err)
		}
		wantLines := bytes.Count(plain, []byte("\n"))
		if n := bytes.Count(file, []byte("\n")); n != wantLines {
			t.Fatalf("%d lines, want %d:\n%s", n, wantLines, file)
		}
		for _, line := range strings.Split(string(file), "\n") {
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
	f, err := mustNew(t, env).render(Spec{Binary: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	section, found := "", 0
	for _, line := range strings.Split(string(f), "\n") {
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
		t.Fatalf("%d RestartPreventExitStatus= lines, want 1:\n%s", found, f)
	}
	if ExitDuplicate == 0 || ExitDuplicate == 1 {
		t.Fatalf("ExitDuplicate %d is not a status of its own", ExitDuplicate)
	}
}

// execStartArgs reads a unit's ExecStart line back as systemd does
// (systemd.service(5), "Command lines"): specifiers first ("%%" is a
// literal "%", any other "%" is a specifier), then words, double quotes
// and their backslash escapes, then, in the arguments only, variables:
// "$$" is a literal "$", while "$NAME" and "${NAME}" would be replaced by
// the environment. An unescaped specifier or variable is an error: the
// service would run something other than what install was asked for.
func execStartArgs(unit string) ([]string, error) {
	var line string
	for l := range strings.SplitSeq(unit, "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			line = v
		}
	}
	if line == "" {
		return nil, fmt.Errorf("no ExecStart line")
	}
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] != '%' {
			b.WriteByte(line[i])
			continue
		}
		if i+1 < len(line) && line[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		return nil, fmt.Errorf("specifier %q in %q", line[i:min(i+2, len(line))], line)
	}
	line = b.String()
	var words []string
	for i := 0; i < len(line); {
		if line[i] == ' ' {
			i++
			continue
		}
		if line[i] != '"' {
			return nil, fmt.Errorf("unquoted word at %q", line[i:])
		}
		var w strings.Builder
		i++
		for ; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' && i+1 < len(line) {
				i++
			}
			w.WriteByte(line[i])
		}
		if i == len(line) {
			return nil, fmt.Errorf("unterminated quote in %q", line)
		}
		i++
		words = append(words, w.String())
	}
	for n, w := range words[1:] {
		var a strings.Builder
		for i := 0; i < len(w); i++ {
			if w[i] != '$' || i+1 == len(w) {
				a.WriteByte(w[i])
				continue
			}
			switch c := w[i+1]; {
			case c == '$':
				a.WriteByte('$')
				i++
			case c == '{' || c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
				return nil, fmt.Errorf("argument %q expands the variable at %q", w, w[i:])
			default:
				a.WriteByte('$')
			}
		}
		words[n+1] = a.String()
	}
	return words, nil
}

// Every "$" of the arguments reaches watch as a "$": a config path holding
// "$HOME" or "${X}" is that path, not the service's environment spliced
// in. The executable itself is not expanded by systemd, so its "$" stays
// single (TestUnitPassesSystemdAnalyzeVerify has systemd find it).
func TestExecStartKeepsDollarsLiteral(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	for _, spec := range []Spec{
		{Binary: "/usr/bin/mcp-reconnect", Config: "/home/u/$HOME/c.toml"},
		{Binary: "/usr/bin/mcp-reconnect", Config: "/home/u/${XDG_CONFIG_HOME}/$$/c$.toml"},
		{Binary: "/opt/$HOME/%h/mcp-reconnect", Config: `/c/%%h/$PATH "q" b\s.toml`},
	} {
		f, err := m.render(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := execStartArgs(string(f))
		if err != nil {
			t.Errorf("%+v: %v\n%s", spec, err, f)
			continue
		}
		want := append(spec.Args(), "--"+EnvFileFlag, m.EnvFile())
		if !slices.Equal(got, want) {
			t.Errorf("systemd would run %q, want %q\n%s", got, want, f)
		}
	}
}

// The reader above is not vacuous: it refuses a variable, a specifier and
// an unquoted word, and keeps "$$" as one dollar.
func TestExecStartArgsReadsAsSystemd(t *testing.T) {
	for _, bad := range []string{
		`ExecStart="/b" "watch" "--config" "$HOME/c"`,
		`ExecStart="/b" "${X}"`,
		`ExecStart="/b" "%h"`,
		`ExecStart=/b watch`,
	} {
		if got, err := execStartArgs(bad); err == nil {
			t.Errorf("%s read as %q, want an error", bad, got)
		}
	}
	got, err := execStartArgs(`ExecStart="/a/$X/b" "$$HOME" "100%%" "q\"\\"`)
	if want := []string{"/a/$X/b", "$HOME", "100%", `q"\`}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

// The unit lets systemd know more than "the process exists": the daemon
// says when it is ready (Type=notify) and pings a watchdog while its
// engines turn, so a hung daemon is killed and, as a failure, restarted.
// Only the main process may notify (a child that inherited
// $NOTIFY_SOCKET cannot speak for it), and the unit still verifies.
func TestUnitIsNotifyWithWatchdog(t *testing.T) {
	env, _ := testEnv(t, nil)
	f, err := mustNew(t, env).render(Spec{Binary: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify\n", "NotifyAccess=main\n", "WatchdogSec=30\n", "Restart=on-failure\n"} {
		if !bytes.Contains(f, []byte(want)) {
			t.Errorf("unit lacks %q:\n%s", want, f)
		}
	}
	if strings.Contains(string(f), "Type=simple") {
		t.Errorf("unit is still Type=simple:\n%s", f)
	}
	if out, err := verifyUnit(t, f); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

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
	users, err := mustNew(t, env).render(Spec{Binary: "/usr/bin/mcp-reconnect"})
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := PackageUnit("/usr/bin/mcp-reconnect")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := withoutUserLines(users), withoutUserLines(pkg); a != b {
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
