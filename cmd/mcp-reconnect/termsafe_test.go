package main

import (
	"bytes"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

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
	d.Status = &statusapi.Status{Servers: []statusapi.ServerStatus{{Snapshot: st}}}
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
