//go:build linux

// Network namespaces (ip netns, setns) exist only on Linux.

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// netnsSeq numbers the namespaces of one test process.
var netnsSeq atomic.Int64

// newNetns makes a network namespace with loopback up, removed at the end.
// It needs root and iproute2; without them the test skips, except in CI.
func newNetns(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("network namespaces need root and iproute2 (ip): %v, euid %d", err, os.Geteuid())
		}
		t.Skip("network namespaces need root and iproute2")
	}
	name := fmt.Sprintf("mcpr-e2e-%d-%d", os.Getpid(), netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	nsRun(t, name, "ip", "link", "set", "lo", "up")
	return name
}

func nsRun(t *testing.T, ns string, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("in %s: %v: %v %s", ns, args, err, out)
	}
}

// nsStart starts a long-running command in ns, killed (with its process
// group) at the end of the test.
func nsStart(t *testing.T, ns string, env []string, out *ochost.Buffer, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}

// inNetns runs fn on a thread switched into ns: a socket belongs to the
// namespace it was created in, so one dialled or listened on in fn is
// ns's, whatever thread uses it later.
func inNetns(ns string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer self.Close()
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return err
	}
	defer func() { _ = unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) }()
	return fn()
}

// nsDial dials inside ns.
func nsDial(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = inNetns(ns, func() error {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// nsClient is an HTTP client whose connections are made inside ns.
func nsClient(t *testing.T, ns string) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: nsDial(ns), DisableKeepAlives: true}}
}

// nsRequest sends one request to the OpenCode at base in ns, naming dir
// with the generation's query (1.x ?directory=, 2.x ?location[directory]=),
// and returns the body of its 2xx answer.
func nsRequest(t *testing.T, c *http.Client, g ochost.Generation, method, base, path, dir, password string, body any) []byte {
	t.Helper()
	key := "directory"
	if g == ochost.Gen2 {
		key = "location[directory]"
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path+sep+url.QueryEscape(key)+"="+url.QueryEscape(dir), rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("opencode", password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}

// nsServe starts OpenCode of generation g in ns, its password in env,
// and waits until it answers; it returns its base URL and a client that
// reaches it. Its output is logged if the test fails.
func nsServe(t *testing.T, ns string, g gen, env []string, password string) (string, *http.Client) {
	t.Helper()
	port := freePort(t)
	out := &ochost.Buffer{}
	nsStart(t, ns, env, out, g.Bin, "serve", "--port", fmt.Sprint(port), "--hostname", "127.0.0.1")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("opencode output:\n%s", out)
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := nsClient(t, ns)
	ready := "/global/health"
	if g.Gen == ochost.Gen2 {
		ready = "/api/info"
	}
	waitFor(t, 60*time.Second, "opencode answering", func() bool {
		// A fresh OpenCode may hang a request in its first half second
		// (docs/opencode.md): each look is short.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+ready, nil)
		req.SetBasicAuth("opencode", password)
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return base, c
}

// nsEnv is a hermetic environment giving OpenCode of generation g (and
// the daemon) password.
func nsEnv(g gen, home, password string) []string {
	env := append(ochost.Env(home), "OPENCODE_SERVER_PASSWORD="+password)
	if g.Gen == ochost.Gen2 {
		env = append(env, "OPENCODE_PASSWORD="+password)
	}
	return env
}

// nsStatus reads dir's MCP status, by server name (1.x GET /mcp, a map;
// 2.x GET /api/mcp, a list).
func nsStatus(t *testing.T, c *http.Client, g gen, base, password, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if g.Gen == ochost.Gen2 {
		var st struct {
			Data []struct {
				Name   string
				Status struct{ Status string }
			}
		}
		_ = json.Unmarshal(nsRequest(t, c, g.Gen, "GET", base, "/api/mcp", dir, password, nil), &st)
		for _, s := range st.Data {
			out[s.Name] = s.Status.Status
		}
		return out
	}
	var st map[string]struct{ Status string }
	_ = json.Unmarshal(nsRequest(t, c, g.Gen, "GET", base, "/mcp", dir, password, nil), &st)
	for name, s := range st {
		out[name] = s.Status
	}
	return out
}

// nsDisconnect disables server name in dir, as the user does (1.x POST
// /mcp/NAME/disconnect, 2.x POST /api/experimental/mcp/NAME/disconnect).
func nsDisconnect(t *testing.T, c *http.Client, g gen, base, password, dir, name string) {
	t.Helper()
	route := "/mcp/" + name + "/disconnect"
	if g.Gen == ochost.Gen2 {
		route = "/api/experimental/mcp/" + name + "/disconnect"
	}
	nsRequest(t, c, g.Gen, "POST", base, route, dir, password, nil)
}

// A network change (an interface with a global address coming up in the
// daemon's namespace) retries a failed server at once, outside its
// backoff; a new interface without one does not. Servers that are not
// failed by then are left alone: one disabled in the config, and one the
// user disabled after the daemon last read status (the change only makes
// the directory due; the check re-reads first).
func TestWatchRetriesOnNetworkChange(t *testing.T) {
	forEachGeneration(t, watchRetriesOnNetworkChange)
}

func watchRetriesOnNetworkChange(t *testing.T, g gen) {
	ns := newNetns(t)
	home := g.newHome(t)
	p := g.newProject(t, nil)
	rewriteProject(t, p, map[string]any{
		"r":    RemoteServer(fmt.Sprintf("http://127.0.0.1:%d/mcp", freePort(t))),
		"gone": RemoteServer(fmt.Sprintf("http://127.0.0.1:%d/mcp", freePort(t))),
		"off":  p.Disabled(p.StdioServer("off")),
	})
	const password = "netns-password"
	env := nsEnv(g, home, password)
	url, oc := nsServe(t, ns, g, env, password)
	logs := &ochost.Buffer{}
	nsStart(t, ns, env, logs, reconnectBin, "watch", "--url", url, "--directory", p.Dir, "--probe=false",
		"--idle-interval", "5m", "--max-delay", "2s", "--status-addr", "", "--log-level", "debug", "--config", "")
	waitLog := func(s string, timeout time.Duration) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !strings.Contains(logs.String(), s) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the daemon's log within %v:\n%s", s, timeout, logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Fast episode spent: the next attempt is 5 min away, and a network
	// change buys one max-delay (2 s here) after the last attempt.
	waitLog("retrying slowly", 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(logs.String(), "retrying slowly") < 2 { // both r and gone
		if time.Now().After(deadline) {
			t.Fatalf("r and gone did not both reach the slow tier:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The user disables gone; the daemon, which reads again only in minutes,
	// still remembers it failed.
	nsDisconnect(t, oc, g, url, password, p.Dir, "gone")
	goneBefore := strings.Count(logs.String(), "server=gone")
	before := strings.Count(logs.String(), "connecting MCP server")

	// A veth pair inside the namespace (dummy devices need a kernel module
	// these machines lack), given an address while down: no change yet,
	// since only an interface that is up and carries a global unicast
	// address counts. Bringing it up is the change.
	nsRun(t, ns, "ip", "link", "add", "mcpr0", "type", "veth", "peer", "name", "mcpr1")
	nsRun(t, ns, "ip", "addr", "add", "198.51.100.1/24", "dev", "mcpr0")
	time.Sleep(2 * time.Second) // a change would be acted on within 1.2 s
	if n := strings.Count(logs.String(), "connecting MCP server"); n != before {
		t.Fatalf("a veth without a usable address caused %d retries; log:\n%s", n-before, logs)
	}
	nsRun(t, ns, "ip", "link", "set", "mcpr0", "up")
	changed := time.Now()
	deadline = changed.Add(2 * time.Second)
	for strings.Count(logs.String(), "connecting MCP server") == before {
		if time.Now().After(deadline) {
			t.Fatalf("no retry within 2 s of the network change; log:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("retried %v after the change", time.Since(changed))
	if !strings.Contains(logs.String(), "network changed; checking MCP servers now") {
		t.Fatalf("the change was not logged:\n%s", logs)
	}
	time.Sleep(2 * time.Second)
	if st := nsStatus(t, oc, g, url, password, p.Dir); st["gone"] != "disabled" || st["off"] != "disabled" {
		t.Fatalf("after the network change OpenCode reports %+v, want gone and off disabled", st)
	}
	if n := strings.Count(logs.String(), "server=gone") - goneBefore; n != 0 {
		t.Fatalf("the daemon acted %d times on gone after the user disabled it:\n%s", n, logs)
	}
	if got := len(p.Starts(t, "off")); got != 0 {
		t.Fatalf("the disabled server was started %d times", got)
	}
}
