// Package e2e tests mcp-reconnect against the real OpenCode binaries and
// real MCP servers built from test/mcpserver: OpenCode 1.18.34 (npm
// opencode-linux-x64) and 2.1.2 (npm @opencode/cli-linux-x64), both pinned
// in scripts/install-opencode.sh. Each capability's test runs on both
// with the same assertions (forEachGeneration, generations_test.go). Each
// test runs its own hermetic OpenCode (temp HOME and XDG dirs, a
// password, its own port and project directories).
//
// The binaries are found through $OPENCODE_BIN and $OPENCODE2_BIN, else
// in the repo's .cache. Without one the tests that need it skip, except
// under CI=true, where they fail.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

var (
	// bins holds the binaries built once by TestMain.
	reconnectBin, mcpServerBin string
	opencodeBin                string
	buildErr                   error
)

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "mcpr-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reconnectBin = filepath.Join(tmp, "mcp-reconnect")
	mcpServerBin = filepath.Join(tmp, "mcpserver")
	for bin, pkg := range map[string]string{reconnectBin: "./cmd/mcp-reconnect", mcpServerBin: "./test/mcpserver"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	findBinaries(repoRoot())
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// needOpenCode skips when the 1.18.34 binary is absent, unless CI is set.
func needOpenCode(t testing.TB) {
	t.Helper()
	needBinary(t, opencodeBin, ochost.Version)
}

// needBinary skips when the binary of OpenCode release v is absent,
// unless CI is set; it fails when the test binaries did not build.
func needBinary(t testing.TB, bin, v string) {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("opencode %s binary missing at %s under CI: run scripts/install-opencode.sh %s (make test does)", v, bin, v)
		}
		t.Skipf("opencode %s binary missing at %s: run `make test`, which installs it", v, bin)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	p, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// OpenCode wraps a hermetic OpenCode server with test helpers.
type OpenCode struct {
	*ochost.OpenCode
	// bin is its binary ("": 1.18.34's).
	bin string
}

// startOpenCode starts a hermetic OpenCode 1.18.34: the form of tests
// that do not run on both generations yet (see forEachGeneration; a
// converted test calls g.startOpenCode).
func startOpenCode(t testing.TB, port int, home string) *OpenCode {
	t.Helper()
	return generations[0].startOpenCode(t, port, home)
}

// restartOpenCode kills oc and starts a new one of the same release on
// its port, with the same home and password (an upgrade, a crash and a
// supervisor).
func restartOpenCode(t testing.TB, oc *OpenCode, home string) *OpenCode {
	t.Helper()
	oc.Kill()
	time.Sleep(time.Second)
	bin := oc.bin
	if bin == "" {
		bin = opencodeBin
	}
	next, err := ochost.Start(ochost.Options{Binary: bin, Generation: oc.Gen, Port: oc.Port, Home: home, Password: oc.Password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Kill)
	return &OpenCode{OpenCode: next, bin: bin}
}

// Status reads dir's MCP servers as a client does (which starts them),
// once each has had its first connect (ochost.OpenCode.Status).
func (o *OpenCode) Status(t testing.TB, dir string) map[string]ochost.MCPStatus {
	t.Helper()
	st, err := o.OpenCode.Status(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// WaitStatus polls until name in dir has status want, or fails the test
// with what it saw.
func (o *OpenCode) WaitStatus(t testing.TB, dir, name, want string, timeout time.Duration) time.Duration {
	t.Helper()
	d, err := o.OpenCode.WaitStatus(dir, name, want, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Project is a project directory with an OpenCode config file of one
// generation, and a directory for its test servers' logs.
type Project struct {
	Dir    string
	LogDir string
	gen    ochost.Generation
}

// newProject makes a project for OpenCode 1.18.34: the form of tests
// that do not run on both generations yet (a converted test calls
// g.newProject).
func newProject(t testing.TB, mcp map[string]any) *Project {
	t.Helper()
	return generations[0].newProject(t, mcp)
}

// StdioServer is the config of a local test server logging to the project.
func (p *Project) StdioServer(name string) map[string]any {
	return map[string]any{"type": "local", "command": []string{mcpServerBin, "-transport", "stdio", "-name", name, "-log", p.ServerLog(name)}}
}

// ServerLog is where the test server called name writes its events.
func (p *Project) ServerLog(name string) string {
	return filepath.Join(p.LogDir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".jsonl")
}

type serverEvent struct {
	Event string `json:"event"`
	PID   int    `json:"pid"`
	Tool  string `json:"tool"`
}

// ServerEvents reads a test server's event log (none when it never ran).
func (p *Project) ServerEvents(t testing.TB, name string) []serverEvent {
	t.Helper()
	f, err := os.Open(p.ServerLog(name))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []serverEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev serverEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}

// Starts counts the processes of a test server that started.
func (p *Project) Starts(t testing.TB, name string) []int {
	var pids []int
	for _, ev := range p.ServerEvents(t, name) {
		if ev.Event == "start" {
			pids = append(pids, ev.PID)
		}
	}
	return pids
}

// KillConnected kills the process of server name that OpenCode holds:
// once OpenCode reports name connected in p.Dir, the newest start (on a
// loaded machine OpenCode's first start may fail and a repair start
// another). It returns how many processes had started before the kill,
// and when it killed.
func (p *Project) KillConnected(t testing.TB, oc *OpenCode, name string) (int, time.Time) {
	t.Helper()
	oc.WaitStatus(t, p.Dir, name, "connected", 60*time.Second)
	starts := p.Starts(t, name)
	killed := time.Now()
	killPID(t, starts[len(starts)-1])
	return len(starts), killed
}

// Watcher is a running `mcp-reconnect watch`.
type Watcher struct {
	StatusAddr string
	cmd        *exec.Cmd
	Log        *ochost.Buffer
	done       chan struct{}
}

// startWatch runs mcp-reconnect watch against oc with extra flags.
func startWatch(t testing.TB, oc *OpenCode, password string, args ...string) *Watcher {
	t.Helper()
	w := &Watcher{StatusAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Log: &ochost.Buffer{}, done: make(chan struct{})}
	all := append([]string{"watch", "--url", oc.URL, "--status-addr", w.StatusAddr, "--log-level", "debug"}, args...)
	w.cmd = exec.Command(reconnectBin, all...)
	w.cmd.Env = append(os.Environ(), "OPENCODE_SERVER_PASSWORD="+password)
	w.cmd.Stdout, w.cmd.Stderr = w.Log, w.Log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
			t.Errorf("watch did not stop within 10 s of SIGTERM")
		}
		// Secrets never reach the daemon's output, in any test.
		if strings.Contains(w.Log.String(), password) || strings.Contains(w.Log.String(), oc.Password) {
			t.Errorf("a password appears in the watcher's output")
		}
		if t.Failed() {
			t.Logf("watch output:\n%s", w.Log)
		}
	})
	return w
}

// WaitLog waits for a line containing s in the watcher's output.
func (w *Watcher) WaitLog(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(w.Log.String(), s) {
			return
		}
		select {
		case <-w.done:
			t.Fatalf("watch exited before logging %q; output:\n%s", s, w.Log)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("watch did not log %q within %v; output:\n%s", s, timeout, w.Log)
}

// WaitStreamUp waits until the watcher's event stream is subscribed (a
// first subscribe can end at once: a fresh OpenCode drops or hangs
// requests in its first half second, and the daemon subscribes again).
func (w *Watcher) WaitStreamUp(t testing.TB, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "the event stream subscribed", func() bool {
		var st struct {
			Servers []struct {
				Stream struct {
					Connected bool `json:"connected"`
				} `json:"stream"`
			} `json:"servers"`
		}
		b, _ := json.Marshal(w.StatusJSON(t))
		return json.Unmarshal(b, &st) == nil && len(st.Servers) > 0 && st.Servers[0].Stream.Connected
	})
}

// StatusJSON runs `mcp-reconnect status --json` against the watcher.
func (w *Watcher) StatusJSON(t testing.TB) map[string]any {
	t.Helper()
	out, err := exec.Command(reconnectBin, "status", "--json", "--status-addr", w.StatusAddr).Output()
	if err != nil {
		t.Fatalf("mcp-reconnect status: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return m
}

// killPID kills one process (a stdio MCP server) as a crash would.
func killPID(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// rewriteProject replaces the project's MCP servers (servers need the
// project's log paths, known only after newProject): name → server
// config, p.StdioServer, RemoteServer or any object both generations
// read alike ({"type": "local", "command": [...]}), marked disabled with
// p.Disabled. The config is written in the project's generation's file
// and shape (ochost.Generation.WriteConfig).
func rewriteProject(t testing.TB, p *Project, mcp map[string]any) *Project {
	t.Helper()
	if err := p.gen.WriteConfig(p.Dir, mcp); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// HTTPServer is a streamable-HTTP test MCP server process.
type HTTPServer struct {
	Port int
	URL  string
	Log  string
	cmd  *exec.Cmd
	args []string
}

// newHTTPServer reserves a port for an HTTP test server without starting it.
func newHTTPServer(t testing.TB, logPath string, args ...string) *HTTPServer {
	t.Helper()
	port := freePort(t)
	s := &HTTPServer{Port: port, URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Log: logPath, args: args}
	t.Cleanup(s.Stop)
	return s
}

// Start starts (or restarts) the server on its port.
func (s *HTTPServer) Start(t testing.TB) {
	t.Helper()
	args := append([]string{"-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", s.Port), "-log", s.Log}, s.args...)
	s.cmd = exec.Command(mcpServerBin, args...)
	out := &ochost.Buffer{}
	s.cmd.Stderr = out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "listening") {
		if time.Now().After(deadline) {
			t.Fatalf("test MCP server on %d did not start: %s", s.Port, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server, if running.
func (s *HTTPServer) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// RemoteServer is the config of a remote server.
func RemoteServer(url string) map[string]any {
	return map[string]any{"type": "remote", "url": url}
}

// Count counts a server's log events of one kind.
func (p *Project) Count(t testing.TB, name, event string) int {
	n := 0
	for _, ev := range p.ServerEvents(t, name) {
		if ev.Event == event {
			n++
		}
	}
	return n
}

// WaitStarts waits until the test server called name has started n
// processes (a crash is followed by a reconnect that spawns a new one).
func (p *Project) WaitStarts(t testing.TB, name string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for len(p.Starts(t, name)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("server %q in %s: %d processes started within %v, want %d", name, p.Dir, len(p.Starts(t, name)), timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func newRequest(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, "GET", url, nil)
}

// listenBusy holds a loopback port open; call the function to free it.
func listenBusy(t testing.TB) (func(), int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return func() { l.Close() }, l.Addr().(*net.TCPAddr).Port
}
