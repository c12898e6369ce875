package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// fakeSystemctl is Env.Run: it records commands and answers from a table.
type fakeSystemctl struct {
	calls [][]string
	// answer returns the output and error for a command.
	answer func(argv []string) ([]byte, error)
}

func (f *fakeSystemctl) Run(_ context.Context, argv []string) ([]byte, error) {
	f.calls = append(f.calls, argv)
	if f.answer != nil {
		return f.answer(argv)
	}
	return nil, nil
}

func (f *fakeSystemctl) joined() []string {
	var out []string
	for _, c := range f.calls {
		out = append(out, strings.Join(c, " "))
	}
	return out
}

// testEnv is a hermetic Linux home with XDG variables pointing into it.
func testEnv(t *testing.T, vars map[string]string) (Env, *fakeSystemctl) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &fakeSystemctl{}
	// No unit for every user unless a test puts one there: the machine's
	// own /usr/lib/systemd/user stays out of it.
	system := []string{filepath.Join(filepath.Dir(home), "etc-systemd-user"), filepath.Join(filepath.Dir(home), "usr-lib-systemd-user")}
	return Env{GOOS: "linux", Home: home, Run: r.Run, Getenv: func(k string) string { return vars[k] }, SystemUnitDirs: system}, r
}

// tree lists every path under root with its mode, for before/after
// comparisons.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, p+" "+fi.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func mustNew(t *testing.T, env Env) *Manager {
	t.Helper()
	m, err := New(env)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// install installs spec and returns what it said.
func install(t *testing.T, m *Manager, spec Spec) string {
	t.Helper()
	var out bytes.Buffer
	if err := m.Install(context.Background(), spec, "test", time.Unix(0, 0), &out, false); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// dryRun is what Install would do for spec.
func dryRun(m *Manager, spec Spec) (string, error) {
	var out bytes.Buffer
	err := m.Install(context.Background(), spec, "t", time.Now(), &out, true)
	return out.String(), err
}

func TestInstallThenUninstallLeavesNothingBehind(t *testing.T) {
	env, r := testEnv(t, nil)
	// Something of the user's that must survive.
	if err := os.MkdirAll(filepath.Join(env.Home, ".config", "mcp-reconnect"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(env.Home, ".config", "mcp-reconnect", "config.toml"), []byte("url = \"http://127.0.0.1:1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := tree(t, env.Home)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/opt/mcp reconnect/bin/mcp-reconnect"})
	fi, err := os.Stat(filepath.Join(env.Home, ".config/systemd/user/mcp-reconnect.service"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("service file: %v %v", fi, err)
	}
	fi, err = os.Stat(m.ManifestPath())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("manifest: %v %v", fi, err)
	}
	want := []string{"systemctl --user daemon-reload", "systemctl --user enable --now mcp-reconnect.service"}
	if got := r.joined(); !reflect.DeepEqual(got, want) {
		t.Fatalf("install ran %q, want %q", got, want)
	}
	r.calls = nil
	var out bytes.Buffer
	installed, err := m.Uninstall(context.Background(), &out, false)
	if err != nil || !installed {
		t.Fatalf("uninstall: %v %v\n%s", installed, err, out.String())
	}
	want = []string{"systemctl --user disable --now mcp-reconnect.service", "systemctl --user daemon-reload"}
	if got := r.joined(); !reflect.DeepEqual(got, want) {
		t.Fatalf("uninstall ran %q, want %q", got, want)
	}
	if after := tree(t, env.Home); !reflect.DeepEqual(before, after) {
		t.Fatalf("uninstall left the home changed:\nbefore %q\nafter  %q", before, after)
	}
}

// The service manager's own directory (default.target.wants, made by
// `systemctl enable`) goes too when install saw it appear.
func TestUninstallRemovesTheManagersEmptyWantsDir(t *testing.T) {
	env, r := testEnv(t, nil)
	m := mustNew(t, env)
	wants := filepath.Join(env.Home, ".config", "systemd", "user", "default.target.wants")
	r.answer = func(argv []string) ([]byte, error) {
		if len(argv) > 2 && argv[2] == "enable" {
			return nil, os.MkdirAll(wants, 0o755)
		}
		return nil, nil
	}
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	if _, err := m.Uninstall(context.Background(), &bytes.Buffer{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(env.Home, ".config")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("~/.config left behind: %v", err)
	}
}

func TestUninstallKeepsWhatTheUserPutInCreatedDirs(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	theirs := filepath.Join(env.Home, ".config", "systemd", "user", "other.service")
	if err := os.WriteFile(theirs, []byte("[Service]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Uninstall(context.Background(), &bytes.Buffer{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Fatalf("the user's unit is gone: %v", err)
	}
	if _, err := os.Stat(m.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("our unit is still there: %v", err)
	}
}

func TestInstallRefusesAndUninstallLeavesAForeignUnit(t *testing.T) {
	env, r := testEnv(t, nil)
	m := mustNew(t, env)
	if err := os.MkdirAll(filepath.Dir(m.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	mine := []byte("[Service]\nExecStart=/home/me/bin/my-own-watch\n")
	if err := os.WriteFile(m.Path(), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dryRun(m, Spec{Binary: "/usr/bin/mcp-reconnect"}); err == nil || !strings.Contains(err.Error(), "not written by") {
		t.Fatalf("plan over a foreign unit: %v", err)
	}
	if _, err := m.Uninstall(context.Background(), &bytes.Buffer{}, false); err == nil {
		t.Fatal("uninstall of a foreign unit succeeded")
	}
	if b, _ := os.ReadFile(m.Path()); !bytes.Equal(b, mine) || len(r.calls) != 0 {
		t.Fatalf("foreign unit touched (%q) or commands run %q", b, r.joined())
	}
}

// A manifest names no file to remove (an old or hostile one that lists
// others is read for what it says of the unit alone): uninstall removes
// the service's own unit and its manifest, and nothing else, even a file
// that carries install's marker.
func TestUninstallRemovesOnlyTheServiceFile(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	precious := filepath.Join(env.Home, "precious.txt")
	marked := filepath.Join(env.Home, "marked.txt")
	if err := os.WriteFile(precious, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marked, []byte("# "+Marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mf map[string]any
	b, _ := os.ReadFile(m.ManifestPath())
	if err := json.Unmarshal(b, &mf); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("x"))
	mf["files"] = []map[string]string{{"path": precious, "sha256": hex.EncodeToString(sum[:])}, {"path": marked}}
	b, _ = json.Marshal(mf)
	if err := os.WriteFile(m.ManifestPath(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := m.Uninstall(context.Background(), &out, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{precious, marked} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("uninstall removed %s, which the manifest named: %v\n%s", p, err, out.String())
		}
	}
	for _, p := range []string{m.Path(), m.ManifestPath()} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
}

// Without a manifest (the state directory was wiped) uninstall still
// removes a unit that carries install's marker.
func TestUninstallWithoutManifestRemovesMarkedUnit(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	if err := os.Remove(m.ManifestPath()); err != nil {
		t.Fatal(err)
	}
	installed, err := m.Uninstall(context.Background(), &bytes.Buffer{}, false)
	if err != nil || !installed {
		t.Fatal(installed, err)
	}
	if _, err := os.Stat(m.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unit left: %v", err)
	}
}

func TestFailedFirstInstallLeavesNothing(t *testing.T) {
	env, r := testEnv(t, nil)
	r.answer = func([]string) ([]byte, error) {
		return []byte("Failed to connect to bus: No medium found"), errors.New("exit status 1")
	}
	before := tree(t, env.Home)
	m := mustNew(t, env)
	err := m.Install(context.Background(), Spec{Binary: "/usr/bin/mcp-reconnect"}, "test", time.Now(), &bytes.Buffer{}, false)
	if err == nil || !strings.Contains(err.Error(), "Failed to connect to bus") || !strings.Contains(err.Error(), "nothing is installed") {
		t.Fatalf("install: %v", err)
	}
	if after := tree(t, env.Home); !reflect.DeepEqual(before, after) {
		t.Fatalf("failed install left:\n%q", after)
	}
}

func TestReinstallRestartsAndKeepsCreatedDirs(t *testing.T) {
	env, r := testEnv(t, nil)
	before := tree(t, env.Home)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	r.calls = nil
	if plan, _ := dryRun(m, Spec{Binary: "/usr/local/bin/mcp-reconnect", Config: "/etc/mcpr.toml"}); strings.Contains(plan, "would create directory") {
		t.Fatalf("second install creates directories:\n%s", plan)
	}
	install(t, m, Spec{Binary: "/usr/local/bin/mcp-reconnect", Config: "/etc/mcpr.toml"})
	if got := r.joined(); got[len(got)-1] != "systemctl --user restart mcp-reconnect.service" {
		t.Fatalf("re-install ran %q: the running daemon keeps the old unit", got)
	}
	b, _ := os.ReadFile(m.Path())
	if !strings.Contains(string(b), `ExecStart="/usr/local/bin/mcp-reconnect" "watch" "--config" "/etc/mcpr.toml"`) {
		t.Fatalf("unit not updated:\n%s", b)
	}
	if _, err := m.Uninstall(context.Background(), &bytes.Buffer{}, false); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, env.Home); !reflect.DeepEqual(before, after) {
		t.Fatalf("after re-install and uninstall:\n%q", after)
	}
}

func TestDryRunUninstallChangesNothing(t *testing.T) {
	env, r := testEnv(t, nil)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	r.calls = nil
	before := tree(t, env.Home)
	var out bytes.Buffer
	if _, err := m.Uninstall(context.Background(), &out, true); err != nil {
		t.Fatal(err)
	}
	if len(r.calls) != 0 || !reflect.DeepEqual(before, tree(t, env.Home)) {
		t.Fatalf("dry run changed something: %q", r.joined())
	}
	for _, s := range []string{"would run: systemctl --user disable --now mcp-reconnect.service", "would remove " + m.Path(), "would remove " + m.ManifestPath()} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("dry run output lacks %q:\n%s", s, out.String())
		}
	}
}

func TestUninstallReportsAStopThatFailed(t *testing.T) {
	env, r := testEnv(t, nil)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	r.answer = func([]string) ([]byte, error) {
		return []byte("Failed to connect to bus"), errors.New("exit status 1")
	}
	_, err := m.Uninstall(context.Background(), &bytes.Buffer{}, false)
	if err == nil || !strings.Contains(err.Error(), "may still run") {
		t.Fatalf("uninstall with a dead bus: %v", err)
	}
}

// A path cannot smuggle a directive into the unit: control characters are
// refused, in the binary, the config and the pinned XDG directories.
func TestNoInjectionThroughPaths(t *testing.T) {
	for _, spec := range []Spec{
		{Binary: "/bin/x\nExecStartPre=/bin/evil"},
		{Binary: "/bin/x", Config: "/c\r\n[Service]"},
		{Binary: "/bin/x\xff"},
		{Binary: "relative/bin"},
	} {
		env, _ := testEnv(t, nil)
		if _, err := dryRun(mustNew(t, env), spec); err == nil {
			t.Errorf("%q accepted", spec)
		}
	}
	env, _ := testEnv(t, map[string]string{"XDG_STATE_HOME": "/s\nExecStartPre=/bin/evil"})
	if _, err := dryRun(mustNew(t, env), Spec{Binary: "/bin/x"}); err == nil {
		t.Error("newline in XDG_STATE_HOME accepted")
	}
}

// Nothing from the environment but the XDG directories reaches the unit:
// a password in the installing shell stays out.
func TestNoSecretFromTheEnvironment(t *testing.T) {
	vars := map[string]string{
		"OPENCODE_SERVER_PASSWORD": "hunter2-secret",
		"XDG_STATE_HOME":           "/state",
		"XDG_CONFIG_HOME":          "relative-ignored",
	}
	env, _ := testEnv(t, vars)
	plan, err := dryRun(mustNew(t, env), Spec{Binary: "/bin/x"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "hunter2") || strings.Contains(plan, "relative-ignored") {
		t.Fatalf("plan holds the environment:\n%s", plan)
	}
	if !strings.Contains(plan, "XDG_STATE_HOME") {
		t.Fatalf("plan does not pin XDG_STATE_HOME:\n%s", plan)
	}
}

func TestStatusComparesWithWhatInstallWouldWrite(t *testing.T) {
	env, r := testEnv(t, nil)
	m := mustNew(t, env)
	r.answer = func(argv []string) ([]byte, error) {
		if argv[2] == "show" {
			return []byte("LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=2\nUnitFileState=enabled\n"), nil
		}
		return nil, nil
	}
	rep, err := m.Status(context.Background(), "/usr/bin/mcp-reconnect")
	if err != nil || rep.Installed {
		t.Fatalf("before install: %+v %v", rep, err)
	}
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect", Config: "/etc/c.toml"})
	rep, err = m.Status(context.Background(), "/usr/bin/mcp-reconnect")
	if err != nil || !rep.Installed || !rep.Current {
		t.Fatalf("after install: %+v %v", rep, err)
	}
	want := Running{Active: true, State: "active (running)", PID: 4242, Restarts: 2, Enabled: "enabled"}
	if *rep.Running != want {
		t.Fatalf("running = %+v", *rep.Running)
	}
	if rep, _ = m.Status(context.Background(), "/elsewhere/mcp-reconnect"); rep.Current || !strings.Contains(rep.Differs, "/elsewhere") {
		t.Fatalf("moved binary: %+v", rep)
	}
	b, _ := os.ReadFile(m.Path())
	if err := os.WriteFile(m.Path(), append(b, "Nice=5\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, _ = m.Status(context.Background(), "/usr/bin/mcp-reconnect"); rep.Current || !strings.Contains(rep.Differs, "edited") {
		t.Fatalf("edited unit: %+v", rep)
	}
}

// The unit's environment file is checked as the config file is: another
// user's is refused, and one that others can change; one that others can
// read is refused when it holds a password, and a warning otherwise; a
// private one, or none, is fine. Install says so before it writes
// anything; status shows the same.
func TestEnvFileChecks(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	ef := m.EnvFile()
	if w, err := CheckEnvFileAt(ef); err != nil || w != "" {
		t.Fatalf("absent env file: %q, %v", w, err)
	}
	if err := os.MkdirAll(filepath.Dir(ef), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(ef, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(ef, mode); err != nil {
			t.Fatal(err)
		}
	}
	const pw = "# the service's\nOPENCODE_SERVER_PASSWORD=hunter2-secret\n"
	for _, tc := range []struct {
		body      string
		mode      os.FileMode
		refused   string // in the error; "" for none
		warned    string // in the warning; "" for none
		statusSay string
	}{
		{pw, 0o600, "", "", "private"},
		{pw, 0o640, "holds a password (OPENCODE_SERVER_PASSWORD)", "", "refused"},
		{pw, 0o644, "holds a password (OPENCODE_SERVER_PASSWORD)", "", "refused"},
		{"MCP_RECONNECT_LOG_LEVEL=debug\nMCP_RECONNECT_PASSWORD_FILE=/run/pw\n", 0o644, "", "holds no password", "holds no password"},
		{"MCP_RECONNECT_LOG_LEVEL=debug\n", 0o620, "other users can change it", "", "refused"},
		{"MCP_RECONNECT_LOG_LEVEL=debug\n", 0o602, "other users can change it", "", "refused"},
		{"; nothing\n#OPENCODE_SERVER_PASSWORD=old\nOPENCODE_SERVER_PASSWORD=\n", 0o644, "", "holds no password", "holds no password"},
	} {
		write(tc.body, tc.mode)
		w, err := CheckEnvFileAt(ef)
		switch {
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "chmod 600 "+ef)):
			t.Errorf("%04o %q: %v, want refused: %s", tc.mode, tc.body, err, tc.refused)
		case tc.refused == "" && err != nil:
			t.Errorf("%04o %q: refused: %v", tc.mode, tc.body, err)
		case tc.warned != "" && !strings.Contains(w, tc.warned):
			t.Errorf("%04o %q: warning %q, want %q", tc.mode, tc.body, w, tc.warned)
		case tc.warned == "" && w != "":
			t.Errorf("%04o %q: warning %q, want none", tc.mode, tc.body, w)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") || strings.Contains(w, "hunter2") {
			t.Errorf("the check quotes the password: %v %q", err, w)
		}
		if st := envFileState(ef); !strings.Contains(st, tc.statusSay) {
			t.Errorf("%04o %q: status says %q, want %q", tc.mode, tc.body, st, tc.statusSay)
		}
	}

	// Another user's file, whatever its mode (as root, which can give it
	// away; elsewhere this part cannot run).
	write(pw, 0o600)
	if err := os.Chown(ef, 4242, 4242); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot give the file to another user under CI (root): %v", err)
		}
		t.Skipf("cannot give the file to another user here: %v", err)
	}
	if _, err := CheckEnvFileAt(ef); err == nil || !strings.Contains(err.Error(), "belongs to another user") {
		t.Errorf("another user's env file: %v", err)
	}
	if st := envFileState(ef); !strings.Contains(st, "belongs to another user") {
		t.Errorf("status of another user's env file: %q", st)
	}
}

// The unit tells the daemon which environment file it was started with,
// as a flag (an Environment= variable would be overridden by the file).
func TestUnitNamesItsEnvironmentFile(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	f, err := m.render(Spec{Binary: "/usr/bin/mcp-reconnect"})
	if err != nil {
		t.Fatal(err)
	}
	want := `ExecStart="/usr/bin/mcp-reconnect" "watch" "--` + EnvFileFlag + `" "` + m.EnvFile() + `"` + "\n"
	if !strings.Contains(string(f), want) {
		t.Fatalf("unit lacks %q:\n%s", want, f)
	}
}

func TestParseSystemdShowNotFound(t *testing.T) {
	r := parseSystemdShow([]byte("LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\nNRestarts=0\nUnitFileState=\n"))
	if r.Active || r.State != "not loaded" {
		t.Fatalf("%+v", r)
	}
}

// Off Linux there is no service to install: the error says so and how to
// keep the daemon on instead, before anything is read or written.
func TestServiceIsLinuxOnly(t *testing.T) {
	for goos, want := range map[string]string{
		"darwin":  "service: supported on Linux with systemd only, not on macOS: run `mcp-reconnect watch` from a launchd agent or login item of your own (or `brew services start mcp-reconnect` when Homebrew installed it)",
		"freebsd": "service: supported on Linux with systemd only, not on freebsd: run `mcp-reconnect watch` from your own service manager",
	} {
		m, err := New(Env{GOOS: goos, Home: "/h"})
		if m != nil || !errors.Is(err, errors.ErrUnsupported) || !strings.HasPrefix(err.Error(), want+":") {
			t.Errorf("New on %s = %v, %v; want the error %q", goos, m, err, want)
		}
	}
}
