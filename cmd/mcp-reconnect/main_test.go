package main

import (
	"bytes"
	"context"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	"io/fs"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersionAndHelp(t *testing.T) {
	if code, out, _ := runCLI(t, "version"); code != 0 || !strings.HasPrefix(out, "mcp-reconnect ") {
		t.Fatalf("version: %d %q", code, out)
	}
	code, out, _ := runCLI(t, "watch", "--help")
	if code != 0 {
		t.Fatalf("watch --help exit %d", code)
	}
	for _, flag := range []string{"--url", "--username", "--password", "--directory", "--status-addr", "--initial-delay", "--max-delay",
		"--idle-interval", "--jitter", "--max-concurrent", "--fast-attempts", "--slow-interval", "--log-level", "--log-format"} {
		if !strings.Contains(out, flag) {
			t.Errorf("watch --help lacks %s", flag)
		}
	}
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	t.Setenv("OPENCODE_URL", "http://127.0.0.1:5000")
	t.Setenv("MCP_RECONNECT_INITIAL_DELAY", "not-a-duration") // ignored: the flag is given
	t.Setenv("MCP_RECONNECT_MAX_CONCURRENT", "7")
	t.Setenv("MCP_RECONNECT_DIRECTORY", "/a:/b c")
	t.Setenv("OPENCODE_SERVER_PASSWORD", "from-env")
	if err := fs.Parse([]string{"--initial-delay", "3s"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if len(f.urls) != 1 || f.urls[0] != "http://127.0.0.1:5000" || f.engine.Backoff.Initial != 3*time.Second || f.engine.MaxConcurrent != 7 || f.password != "from-env" {
		t.Fatalf("flags = %+v", f)
	}
	if len(f.directories) != 2 || f.directories[1] != "/b c" {
		t.Fatalf("directories = %q", f.directories)
	}
}

func TestBadSettingsNameTheirSource(t *testing.T) {
	t.Setenv("MCP_RECONNECT_MAX_CONCURRENT", "lots")
	code, _, errOut := runCLI(t, "watch")
	if code == 0 || !strings.Contains(errOut, "MCP_RECONNECT_MAX_CONCURRENT") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	t.Setenv("MCP_RECONNECT_MAX_CONCURRENT", "")
	cases := map[string][]string{
		"jitter":         {"watch", "--jitter", "1.5"},
		"max-concurrent": {"watch", "--max-concurrent", "0"},
		"log-level":      {"watch", "--log-level", "loud"},
		"log-format":     {"watch", "--log-format", "xml"},
		"--max-delay":    {"watch", "--initial-delay", "10s", "--max-delay", "1s"},
		"idle-interval":  {"watch", "--idle-interval", "0s"},
		"unknown flag":   {"watch", "--nope"},
	}
	for want, args := range cases {
		code, _, errOut := runCLI(t, args...)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("%v: exit %d, stderr %q, want it to name %q", args, code, errOut, want)
		}
	}
	// A log setting that is refused makes no log file.
	logFile := filepath.Join(t.TempDir(), "logs", "w.log")
	if code, _, _ := runCLI(t, "watch", "--log-file", logFile, "--log-format", "xml"); code == 0 {
		t.Fatal("--log-format xml was taken")
	}
	if _, err := os.Stat(filepath.Dir(logFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused --log-format made %s (%v)", filepath.Dir(logFile), err)
	}
}

func TestPasswordNeverEchoed(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_PASSWORD", "hunter2-secret")
	t.Setenv("MCP_RECONNECT_JITTER", "bad")
	_, out, errOut := runCLI(t, "watch")
	if strings.Contains(out+errOut, "hunter2") {
		t.Fatal("the password was printed")
	}
}

func TestStatusWithoutDaemon(t *testing.T) {
	code, _, errOut := runCLI(t, "status", "--status-addr", "127.0.0.1:1")
	if code == 0 || !strings.Contains(errOut, "mcp-reconnect watch") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestMain keeps the user's own config file and state out of these tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpr-cmd-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// otherDaemon registers a running process (not this one) as a daemon
// watching url, and returns its pid.
func otherDaemon(t *testing.T, url string) int {
	t.Helper()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no sleep under CI: %v", err)
		}
		t.Skipf("no sleep to stand for another daemon: %v", err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	remove, err := reg.Register(registry.Entry{PID: other.Process.Pid, URLs: []string{url}, StatusAddr: "127.0.0.1:4097", Started: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return other.Process.Pid
}

// A watch refused because another daemon watches the same server exits
// service.ExitDuplicate, which the unit does not restart after, and says
// why in one log line that names the other daemon's pid and the fix; the
// variable the Homebrew formula's service sets makes it exit 0 (launchd's
// KeepAlive restarts any other status); with --log-file the refusal
// reaches the terminal too.
func TestRefusedDuplicateExitsSoThatTheServiceIsNotRestarted(t *testing.T) {
	const url = "http://127.0.0.1:1"
	pid := otherDaemon(t, url)
	args := []string{"watch", "--url", url, "--status-addr", "", "--netwatch=false"}

	code, out, errOut := runCLI(t, args...)
	if code != service.ExitDuplicate {
		t.Fatalf("exit %d, want %d:\n%s%s", code, service.ExitDuplicate, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want one:\n%s", len(lines), errOut)
	}
	for _, want := range []string{"level=ERROR", "other_pid=" + strconv.Itoa(pid), "kill " + strconv.Itoa(pid), "mcp-reconnect status", "--allow-duplicate", "exit_status=78"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the refusal does not say %q:\n%s", want, lines[0])
		}
	}

	t.Setenv(service.DuplicateExitEnv, "0")
	if code, _, errOut := runCLI(t, args...); code != 0 || !strings.Contains(errOut, "other_pid="+strconv.Itoa(pid)) {
		t.Fatalf("with %s=0: exit %d, want 0 and the same line:\n%s", service.DuplicateExitEnv, code, errOut)
	}
	t.Setenv(service.DuplicateExitEnv, "nonsense")
	if code, _, _ := runCLI(t, args...); code != service.ExitDuplicate {
		t.Fatalf("with %s=nonsense: exit %d, want %d", service.DuplicateExitEnv, code, service.ExitDuplicate)
	}
	t.Setenv(service.DuplicateExitEnv, "")

	logFile := filepath.Join(t.TempDir(), "watch.log")
	code, _, errOut = runCLI(t, append(args, "--log-file", logFile)...)
	logged, _ := os.ReadFile(logFile)
	if code != service.ExitDuplicate || !strings.Contains(errOut, "pid "+strconv.Itoa(pid)) || !strings.Contains(string(logged), "other_pid="+strconv.Itoa(pid)) {
		t.Fatalf("with --log-file: exit %d, stderr %q, log %q", code, errOut, logged)
	}
}

// The installed unit names its environment file (--service-env-file);
// watch refuses to start with one that others can change, or that holds
// a password others can read, and warns about one others can only read.
func TestWatchChecksTheServiceEnvironmentFile(t *testing.T) {
	ef := filepath.Join(t.TempDir(), "env")
	args := []string{"watch", "--config", "", "--url", "http://127.0.0.1:1", "--status-addr", "", "--netwatch=false", "--" + service.EnvFileFlag, ef}
	write := func(body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(ef, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(ef, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("OPENCODE_SERVER_PASSWORD=hunter2-secret\n", 0o644)
	code, out, errOut := runCLI(t, args...)
	// Refused: exit 78 (EX_CONFIG), which the unit does not restart after
	// (a restart would be refused again every few seconds), and a line
	// saying why.
	if code != service.ExitConfig || !strings.Contains(errOut, "holds a password") || !strings.Contains(errOut, "chmod 600 "+ef) ||
		!strings.Contains(errOut, "not watching") || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("a readable env file with a password: exit %d, want %d\n%s%s", code, service.ExitConfig, out, errOut)
	}
	write("MCP_RECONNECT_LOG_LEVEL=info\n", 0o666)
	if code, _, errOut := runCLI(t, args...); code != service.ExitConfig || !strings.Contains(errOut, "other users can change it") {
		t.Fatalf("a writable env file: exit %d, want %d\n%s", code, service.ExitConfig, errOut)
	}
	// A readable one without a password: a warning, and watch goes on
	// (to the duplicate check, which ends it here).
	write("MCP_RECONNECT_LOG_LEVEL=info\n", 0o644)
	otherDaemon(t, "http://127.0.0.1:1")
	if code, _, errOut := runCLI(t, args...); code != service.ExitDuplicate || !strings.Contains(errOut, "environment file is readable by other users") {
		t.Fatalf("a readable env file without a password: exit %d, want a warning and then the run\n%s", code, errOut)
	}
}

// commands is every command a user can call, completion's included.
func commands(t *testing.T) []*cobra.Command {
	t.Helper()
	root := newRoot(nil, nil)
	root.InitDefaultCompletionCmd()
	var all []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		all = append(all, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return all
}

// mustMention is, per command, the environment variables its --help must
// name. watch, run and doctor take every flag from the environment (flags >
// env > config file); status and reconnect find the daemon.
func mustMention(c *cobra.Command) []string {
	switch c.Name() {
	case "watch", "run", "doctor":
		var env []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" && f.Name != "json" {
				env = append(env, "$"+envName(f.Name))
			}
		})
		return env
	case "status", "reconnect":
		if c.Parent() != nil && c.Parent().Parent() == nil { // not `service status`
			return []string{"$MCP_RECONNECT_STATUS_ADDR"}
		}
	}
	return nil
}

var envInUsage = regexp.MustCompile(`\[\$([A-Z_]+)`)

// Every command's --help exits 0, says what the command does, and names the
// environment variables it reads; a variable a flag's help names is the
// one that sets it.
func TestHelpOfEveryCommand(t *testing.T) {
	all := commands(t)
	if len(all) < 10 {
		t.Fatalf("only %d commands found", len(all))
	}
	for _, c := range all {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"root"}, path...), "_"), func(t *testing.T) {
			code, out, errOut := runCLI(t, append(path, "--help")...)
			if code != 0 || errOut != "" {
				t.Fatalf("--help: exit %d, stderr %q", code, errOut)
			}
			if c.Long == "" || !strings.Contains(out, strings.TrimSpace(c.Long)[:20]) {
				t.Errorf("--help does not say what it does at length (no Long text):\n%s", out)
			}
			for _, env := range mustMention(c) {
				if !strings.Contains(out, env) {
					t.Errorf("--help does not mention %s", env)
				}
			}
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if m := envInUsage.FindStringSubmatch(f.Usage); m != nil && m[1] != envName(f.Name) {
					t.Errorf("--%s says $%s, but $%s sets it", f.Name, m[1], envName(f.Name))
				}
			})
		})
	}
}

// Each shell's script is cobra's: it hooks the program name and asks the
// binary itself (`mcp-reconnect __complete …`) at each <Tab>, so the
// subcommands and flags it offers are always those of the installed
// binary. Checked here: the script, and what __complete answers.
func TestCompletion(t *testing.T) {
	hooks := map[string]string{
		"bash": "complete -o default -F __start_mcp-reconnect mcp-reconnect",
		"zsh":  "compdef _mcp-reconnect mcp-reconnect",
		"fish": "complete -c mcp-reconnect",
	}
	for shell, hook := range hooks {
		code, out, errOut := runCLI(t, "completion", shell)
		if code != 0 || errOut != "" {
			t.Fatalf("completion %s: exit %d, stderr %q", shell, code, errOut)
		}
		if !strings.Contains(out, hook) || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: script lacks %q or the __complete call:\n%.400s", shell, hook, out)
		}
	}
	code, out, _ := runCLI(t, "__complete", "")
	if code != 0 {
		t.Fatalf("__complete: exit %d", code)
	}
	for _, sub := range []string{"run", "watch", "status", "reconnect", "doctor", "version", "completion", "man"} {
		if !regexp.MustCompile(`(?m)^` + sub + `\t`).MatchString(out) {
			t.Errorf("__complete '' does not offer %s:\n%s", sub, out)
		}
	}
	if _, out, _ := runCLI(t, "__complete", "watch", "--max-"); !strings.Contains(out, "--max-delay") || !strings.Contains(out, "--max-concurrent") {
		t.Errorf("__complete watch --max- offers:\n%s", out)
	}
}

// man writes one page per command, in man(7) format, with the same text as
// --help.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	if code, _, errOut := runCLI(t, "man", dir); code != 0 {
		t.Fatalf("man: exit %d %s", code, errOut)
	}
	for _, c := range commands(t) {
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no page for %q: %v", c.CommandPath(), err)
			continue
		}
		page := string(b)
		if !strings.HasPrefix(page, ".nh\n.TH \"MCP-RECONNECT\" \"1\"") || !strings.Contains(page, ".SH DESCRIPTION") {
			t.Errorf("%s is not a man page:\n%.300s", name, page)
		}
		for _, env := range mustMention(c) {
			if !strings.Contains(page, env) {
				t.Errorf("%s does not mention %s", name, env)
			}
		}
	}
	code, out, _ := runCLI(t, "man")
	if code != 0 || !strings.Contains(out, ".SH NAME\nmcp-reconnect - Keep the MCP servers") {
		t.Errorf("man to stdout: exit %d\n%.300s", code, out)
	}
}

// doctor has only the flags it reads, each in its own words: none of
// watch's schedule, logging or status-API tunables, and no flag text
// copied from watch (--directory is not "to watch from the start").
// --allow-http-password means the same for both: both send the password.
func TestDoctorHelpHasOnlyItsFlagsInItsWords(t *testing.T) {
	var doctor, watch *cobra.Command
	for _, c := range commands(t) {
		switch c.CommandPath() {
		case "mcp-reconnect doctor":
			doctor = c
		case "mcp-reconnect watch":
			watch = c
		}
	}
	for _, name := range []string{"initial-delay", "max-delay", "idle-interval", "jitter", "max-concurrent", "fast-attempts", "slow-interval",
		"stable-after", "log-level", "log-format", "log-file", "status-public", "probe", "toast", "netwatch", "allow-duplicate"} {
		if doctor.Flags().Lookup(name) != nil {
			t.Errorf("doctor has --%s, which it does not read", name)
		}
	}
	doctor.Flags().VisitAll(func(f *pflag.Flag) {
		if w := watch.Flags().Lookup(f.Name); w != nil && w.Usage == f.Usage && f.Name != "allow-http-password" {
			t.Errorf("doctor's --%s says what watch's does: %q", f.Name, f.Usage)
		}
	})
	_, out, _ := runCLI(t, "doctor", "--help")
	for _, copied := range []string{"to watch from the start", "listen address", "stable-after"} {
		if strings.Contains(out, copied) {
			t.Errorf("doctor --help says %q:\n%s", copied, out)
		}
	}
}

// syncBuffer is a bytes.Buffer the daemon's logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The whole command: watch with two [[opencode]] tables, each with its
// password file, and $OPENCODE_SERVER_PASSWORD exported, watches both
// servers (each accepts only its own password). SIGTERM ends it with one
// info line that names the signal. The variable's value is never printed.
func TestWatchWithTablesAndTheVariableExportedStopsOnSIGTERMWithALine(t *testing.T) {
	const ambient = "ambient-secret"
	t.Setenv("OPENCODE_SERVER_PASSWORD", ambient)
	var cfg strings.Builder
	for _, pw := range []string{"one-secret", "two-secret"} {
		fake := fakeopencode.New(map[string]fakeopencode.Spec{"docs": {Status: "connected"}})
		fake.Password = pw
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		cfg.WriteString("[[opencode]]\nurl = \"" + srv.URL + "\"\npassword-file = \"" + passwordFile(t, pw) + "\"\n")
	}
	var out, errOut syncBuffer
	root := newRoot(&out, &errOut)
	root.SetArgs([]string{"watch", "--config", writeConfig(t, cfg.String()), "--status-addr", "", "--netwatch=false", "--probe=false"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(context.Background()) }()

	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(errOut.String(), `msg="watching opencode"`) < 2 {
		select {
		case err := <-done:
			t.Fatalf("watch ended: %v\n%s", err, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch did not watch both servers:\n%s", errOut.String())
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("watch did not stop on SIGTERM:\n%s", errOut.String())
	}
	log := errOut.String()
	if n := strings.Count(log, "signal=SIGTERM"); n != 1 || !strings.Contains(log, `level=INFO msg="stopping: signal received" signal=SIGTERM`) {
		t.Errorf("want one info line naming SIGTERM, got:\n%s", log)
	}
	if strings.Count(log, "OPENCODE_SERVER_PASSWORD is set but not used") != 1 {
		t.Errorf("want the variable's line once:\n%s", log)
	}
	// A refused password is logged as "answered 401" (a bare "401" would
	// also match a port such as :40107).
	if strings.Contains(log+out.String(), ambient) || strings.Contains(log, "answered 401") {
		t.Errorf("the variable's value was printed, or sent:\n%s", log)
	}
}

// stopOnSignal's goroutine ends with stop, whether a signal came or the
// parent ended first.
func TestStopOnSignalLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	_, stop := stopOnSignal(context.Background(), slog.New(slog.DiscardHandler))
	stop()
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := stopOnSignal(parent, slog.New(slog.DiscardHandler))
	cancel()
	<-ctx.Done()
	stop()
}

// hostile is what a remote MCP server (through OpenCode's error string)
// or OpenCode itself (names, directories) could put into our output: a
// clipboard write (OSC 52), a line erase after a carriage return, a C1
// CSI and a right-to-left override.
const hostile = "x\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07\r\x1b[2Kok\u009b31m\u202e"

// noControl fails when out holds a character a terminal obeys (layout
// newlines aside).
func noControl(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.IndexFunc(out, func(r rune) bool {
		return r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f || r == '\u202e'
	}); i >= 0 {
		t.Errorf("%s holds control character %q at byte %d:\n%q", what, []rune(out[i:])[0], i, out)
	}
	if !strings.Contains(out, `\x1b]52`) {
		t.Errorf("%s does not show the escape sequence as text:\n%q", what, out)
	}
}

// hostileSource is a daemon's engine whose OpenCode names a directory
// and a server with control characters.
type hostileSource struct{ idleSource }

func (hostileSource) Summary() reconnect.Snapshot {
	return reconnect.Snapshot{URL: "http://127.0.0.1:4096", Stream: reconnect.StreamState{LastError: hostile}}
}

func (hostileSource) Directories() iter.Seq[reconnect.DirSnapshot] {
	return slices.Values([]reconnect.DirSnapshot{{Directory: "/p" + hostile, ArmedBy: "flag",
		Servers: []reconnect.ServerSnapshot{{Name: "s" + hostile, Status: "failed", Error: hostile}}}})
}

func (hostileSource) Arm(string, string) error { return nil }

func (hostileSource) Reconnect(string, []string) (reconnect.ReconnectResult, error) {
	return reconnect.ReconnectResult{URL: "http://127.0.0.1:4096", Directories: []string{"/p" + hostile}}, nil
}

// Every human-readable output escapes control characters that came from
// OpenCode or an MCP server: status (one daemon and several), reconnect,
// the error line, doctor and service status.
func TestHumanOutputEscapesControlCharacters(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	startHostileDaemon := func(pid int) registry.Entry {
		t.Helper()
		token, _ := registry.NewToken()
		s := &statusapi.API{Sources: []statusapi.Source{hostileSource{idleSource{url: "http://127.0.0.1:4096"}}}, Broker: statusapi.NewBroker(), Metrics: metrics.NewSet(), Token: token}
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(func() { s.Broker.Close(); hs.Close() })
		e := registry.Entry{PID: pid, URLs: []string{"http://127.0.0.1:4096"}, StatusAddr: strings.TrimPrefix(hs.URL, "http://"), Token: token, Started: time.Now()}
		reg, _ := registry.Default()
		remove, err := reg.Register(e)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(remove)
		return e
	}
	one := startHostileDaemon(os.Getpid())

	_, out, _ := runCLI(t, "status")
	noControl(t, "status", out)
	_, out, _ = runCLI(t, "reconnect")
	noControl(t, "reconnect", out)

	// A daemon (or whatever answers there) whose error body is hostile:
	// main prints the error line.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, hostile, http.StatusInternalServerError)
	}))
	defer bad.Close()
	_, _, errOut := runCLI(t, "status", "--status-addr", strings.TrimPrefix(bad.URL, "http://"))
	noControl(t, "the error line", errOut)

	// Several daemons: each block, and the one that does not answer.
	other := otherProcess(t)
	startHostileDaemon(other.Process.Pid)
	silent := otherProcess(t)
	reg, _ := registry.Default()
	remove, err := reg.Register(registry.Entry{PID: silent.Process.Pid, StatusAddr: strings.TrimPrefix(bad.URL, "http://"), Token: "t", Started: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	_, out, _ = runCLI(t, "status")
	noControl(t, "status of several daemons", out)
	if !strings.Contains(out, `not answering: mcp-reconnect at`) {
		t.Errorf("status of several daemons does not show the one that fails:\n%s", out)
	}

	// service status: the daemon's view and its error.
	m, err := service.New(service.Env{GOOS: "linux", Home: t.TempDir(), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	st := hostileSource{}.Summary()
	st.Directories = slices.Collect(hostileSource{}.Directories())
	d := viewOf(one)
	d.Status = &statusapi.Status{Servers: []statusapi.OpenCodeStatus{{Snapshot: st}}}
	notAnswering := viewOf(one)
	notAnswering.Error = "answered 500: " + hostile
	writeServiceStatus(&b, m, serviceStatus{Service: service.Report{Installed: true, RunningError: hostile, Differs: hostile}, Daemon: &d,
		Others: []daemonView{{PID: 1, URLs: []string{"http://h" + hostile}}}})
	writeServiceStatus(&b, m, serviceStatus{Daemon: &notAnswering, DaemonError: hostile})
	writeServiceStatus(&b, m, serviceStatus{DaemonError: hostile})
	// The service manager's own words (systemctl).
	writeServiceStatus(&b, m, serviceStatus{Service: service.Report{Installed: true, Running: &service.Running{State: "active" + hostile, Enabled: "yes"}}})
	noControl(t, "service status", b.String())
}

// run's own error line carries the last output of an OpenCode that never
// became healthy: text a program wrote, shown escaped.
func TestRunErrorLineEscapesTheChildsOutput(t *testing.T) {
	dir := t.TempDir()
	script := dir + "/opencode"
	body := "#!/bin/sh\n[ \"$1\" = --version ] && { echo 1.18.34; exit 0; }\nprintf '" + strings.NewReplacer("\x1b", `\033`, "\x07", `\007`, "\r", `\r`, "\u009b", `\302\233`, "\u202e", `\342\200\256`).Replace(hostile) + "\\n'\nexec sleep 30\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", "--start-timeout", "1s", "--status-addr", "", "--log-file", dir + "/log", "--", script, "serve"}, &stdout, &stderr)
	if code == 0 {
		t.Fatalf("run exited 0 for an OpenCode that never answered; stderr:\n%s", &stderr)
	}
	noControl(t, "run's error line", stderr.String())
}
