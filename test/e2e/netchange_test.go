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
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/ochost"
)

// resetProxy forwards TCP connections, made inside a namespace, to a
// target there, and can kill every live one at once (cut) while new ones
// go through: what joining a VPN does to the connections of the route it
// takes over, while the server behind them stays up. A cut connection
// dies silently, as one whose route moved: nothing tells the client until
// it sends on it, and then it is reset (an RST, which OpenCode's runtime
// reports as "The socket connection was closed unexpectedly").
type resetProxy struct {
	l      net.Listener
	target string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	mu     sync.Mutex
	links  map[*link]bool
	wg     sync.WaitGroup
}

// link is one client connection and its connection to the target.
type link struct {
	c, u net.Conn
	dead bool // cut: the next thing the client sends is answered with an RST
}

// startResetProxy listens on loopback in ns and forwards to target in ns.
func startResetProxy(t *testing.T, ns, target string) *resetProxy {
	t.Helper()
	p := &resetProxy{target: target, dial: nsDial(ns), links: map[*link]bool{}}
	err := inNetns(ns, func() (err error) {
		p.l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		p.l.Close()
		p.mu.Lock()
		for l := range p.links {
			reset(l.c)
			l.u.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *resetProxy) addr() string { return p.l.Addr().String() }

func (p *resetProxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.pipe(c) })
	}
}

func (p *resetProxy) pipe(c net.Conn) {
	u, err := p.dial(context.Background(), "tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	l := &link{c: c, u: u}
	p.mu.Lock()
	p.links[l] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	back := make(chan struct{})
	go func() {
		defer close(back)
		_, _ = io.Copy(c, u)
		if !p.isDead(l) {
			c.Close() // the server ended it: so does the client's side
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if p.isDead(l) {
			reset(c)
			break
		}
		if n > 0 {
			if _, err := u.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	u.Close()
	c.Close()
	<-back
}

func (p *resetProxy) isDead(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return l.dead
}

// cut kills every live connection silently and reports how many.
func (p *resetProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for l := range p.links {
		if !l.dead {
			l.dead = true
			l.u.Close() // the server's side goes; the client's stays, silent
			n++
		}
	}
	return n
}

// reset closes c with an RST.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// nsListen listens on addr inside ns.
func nsListen(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	err := inNetns(ns, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// nsOpenCodeGen is what the test does differently on one OpenCode
// generation running in a namespace: how it is started, configured with
// the scripted model and one remote MCP server, asked whether it is up,
// and prompted. The assertions are the same on every generation.
type nsOpenCodeGen struct {
	name string
	// bin is the OpenCode binary ("" skips: not installed).
	bin func(t *testing.T) string
	// env is the environment that gives OpenCode its password.
	env func(home, password string) []string
	// configure writes dir's config: the scripted model at modelURL and
	// the remote MCP server "rem" at remoteURL.
	configure func(t *testing.T, dir, modelURL, remoteURL string)
	// ready is the route that answers 200 once the server is up.
	ready string
	// status reads the MCP status of dir, by server name.
	status func(t *testing.T, c *http.Client, base, password, dir string) map[string]string
	// prompt sends one prompt in a new session in dir and returns the
	// state and output of the tool part it recorded.
	prompt func(t *testing.T, c *http.Client, base, password, dir string) (status, output string)
}

var nsOpenCode1 = nsOpenCodeGen{
	name: "1.18.34",
	bin:  func(t *testing.T) string { needOpenCode(t); return opencodeBin },
	env: func(home, password string) []string {
		return append(ochost.Env(home), "OPENCODE_SERVER_PASSWORD="+password)
	},
	configure: func(t *testing.T, dir, modelURL, remoteURL string) {
		cfg := map[string]any{
			"$schema": "https://opencode.ai/config.json",
			"provider": map[string]any{"fake": map[string]any{"npm": "@ai-sdk/openai-compatible",
				"options": map[string]any{"baseURL": modelURL + "/v1", "apiKey": "x"},
				"models":  map[string]any{"m": map[string]any{"name": "m", "tool_call": true}}}},
			"model": "fake/m",
			"mcp":   map[string]any{"rem": RemoteServer(remoteURL)},
		}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "opencode.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	},
	ready: "/global/health",
	status: func(t *testing.T, c *http.Client, base, password, dir string) map[string]string {
		var st map[string]struct{ Status string }
		_ = json.Unmarshal(nsOpenCode(t, c, "GET", base, "/mcp", dir, password), &st)
		out := map[string]string{}
		for name, s := range st {
			out[name] = s.Status
		}
		return out
	},
	prompt: nsPrompt1,
}

// nsPrompt1 drives one prompt on OpenCode 1.x (docs: opencode-facts.md,
// "Driving a real prompt").
func nsPrompt1(t *testing.T, c *http.Client, base, password, dir string) (status, output string) {
	t.Helper()
	do := func(method, path string, body any) []byte {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path+"?directory="+urlQueryEscape(dir), rd)
		req.SetBasicAuth("opencode", password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	var sess struct{ ID string }
	_ = json.Unmarshal(do("POST", "/session", map[string]any{"title": "e2e"}), &sess)
	do("POST", "/session/"+sess.ID+"/message", map[string]any{"parts": []any{map[string]any{"type": "text", "text": "echo hello"}}})
	var msgs []struct {
		Parts []struct {
			Type  string `json:"type"`
			State struct {
				Status string `json:"status"`
				Output string `json:"output"`
				Error  string `json:"error"`
			} `json:"state"`
		} `json:"parts"`
	}
	_ = json.Unmarshal(do("GET", "/session/"+sess.ID+"/message", nil), &msgs)
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "tool" {
				return p.State.Status, p.State.Output + p.State.Error
			}
		}
	}
	t.Fatalf("no tool part in the session: %+v", msgs)
	return "", ""
}

// opencode2Bin is the released OpenCode 2.1.2 ($OPENCODE2_BIN, else the
// repository's .cache/opencode-2.1.2): npm's @opencode/cli-linux-x64.
// Without it the test skips, except in CI.
func opencode2Bin(t *testing.T) string {
	t.Helper()
	needOpenCode(t) // the binaries this test builds
	bin := os.Getenv("OPENCODE2_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(), ".cache", "opencode-2.1.2", "node_modules", "@opencode", "cli-linux-x64", "bin", "opencode")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("OpenCode 2.1.2 missing at %s under CI: npm install --prefix .cache/opencode-2.1.2 @opencode/cli-linux-x64@2.1.2", bin)
		}
		t.Skipf("OpenCode 2.1.2 missing at %s: npm install --prefix .cache/opencode-2.1.2 @opencode/cli-linux-x64@2.1.2", bin)
	}
	return bin
}

var nsOpenCode2 = nsOpenCodeGen{
	name: "2.1.2",
	bin:  opencode2Bin,
	env: func(home, password string) []string {
		return append(ochost.Env(home), "OPENCODE_PASSWORD="+password, "OPENCODE_SERVER_PASSWORD="+password)
	},
	// opencode-v2-facts.md §7.2. Code Mode off: the model sees the MCP
	// tools themselves.
	configure: func(t *testing.T, dir, modelURL, remoteURL string) {
		cfg := map[string]any{
			"providers": map[string]any{"fake": map[string]any{"name": "Fake", "package": "@ai-sdk/openai-compatible",
				"settings": map[string]any{"baseURL": modelURL + "/v1", "apiKey": "x"},
				"models":   map[string]any{"m": map[string]any{"name": "m", "capabilities": map[string]any{"tools": true}}}}},
			"model":       "fake/m",
			"permissions": []any{map[string]any{"action": "*", "resource": "*", "effect": "allow"}},
			"mcp":         map[string]any{"servers": map[string]any{"rem": map[string]any{"type": "remote", "url": remoteURL, "codemode": false}}},
		}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "opencode.jsonc"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	},
	ready: "/api/info",
	status: func(t *testing.T, c *http.Client, base, password, dir string) map[string]string {
		req, _ := http.NewRequest("GET", base+"/api/mcp?location%5Bdirectory%5D="+url.QueryEscape(dir), nil)
		req.SetBasicAuth("opencode", password)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET /api/mcp: %v", err)
		}
		defer resp.Body.Close()
		var st struct {
			Data []struct {
				Name   string
				Status struct{ Status string }
			}
		}
		_ = json.NewDecoder(resp.Body).Decode(&st)
		out := map[string]string{}
		for _, s := range st.Data {
			out[s.Name] = s.Status.Status
		}
		return out
	},
	prompt: nsPrompt2,
}

// nsPrompt2 drives one prompt on OpenCode 2.1.2 (opencode-v2-facts.md
// §7.2): a session, its prompt, a wait for the turn, then its messages.
func nsPrompt2(t *testing.T, c *http.Client, base, password, dir string) (status, output string) {
	t.Helper()
	q := "?location%5Bdirectory%5D=" + url.QueryEscape(dir)
	do := func(method, path, extra string, body any) []byte {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path+q+extra, bytes.NewReader(b))
		if body == nil {
			req, _ = http.NewRequest(method, base+path+q+extra, nil)
		}
		req.SetBasicAuth("opencode", password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return out
	}
	var sess struct {
		Data struct{ ID string } `json:"data"`
	}
	_ = json.Unmarshal(do("POST", "/api/session", "", map[string]any{"title": "e2e", "location": map[string]any{"directory": dir}}), &sess)
	do("POST", "/api/session/"+sess.Data.ID+"/prompt", "", map[string]any{"text": "echo hello"})
	do("POST", "/api/experimental/session/"+sess.Data.ID+"/wait", "", map[string]any{})
	raw := do("GET", "/api/session/"+sess.Data.ID+"/message", "&order=asc&limit=200", nil)
	var msgs struct {
		Data []struct {
			Content []struct {
				Type  string `json:"type"`
				State struct {
					Status  string `json:"status"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
					Error any `json:"error"`
				} `json:"state"`
			} `json:"content"`
		} `json:"data"`
	}
	_ = json.Unmarshal(raw, &msgs)
	for _, m := range msgs.Data {
		for _, p := range m.Content {
			if p.Type == "tool" {
				var text strings.Builder
				for _, c := range p.State.Content {
					text.WriteString(c.Text)
				}
				if p.State.Error != nil {
					fmt.Fprint(&text, p.State.Error)
				}
				return p.State.Status, text.String()
			}
		}
	}
	t.Fatalf("no tool item in the session: %s", raw)
	return "", ""
}

// The seed report's failure: a remote MCP server behind a route that a
// network change (a VPN joining) resets, while the server stays up.
// OpenCode keeps calling it connected, and its next tool call fails ("The
// socket connection was closed unexpectedly"); this test first shows
// OpenCode alone failing so. With mcp-reconnect watching, the network
// change (an interface with a global address coming up in the daemon's
// namespace) renews the remote session, and the first tool call after
// the change completes. Everything runs in a network namespace of its
// own: OpenCode, the MCP server, the proxy that resets, the scripted
// model and the daemon.
func TestNetworkChangeFirstToolCallWorks(t *testing.T) {
	for _, g := range []nsOpenCodeGen{nsOpenCode1, nsOpenCode2} {
		t.Run(g.name, func(t *testing.T) { networkChangeFirstToolCall(t, g) })
	}
}

func networkChangeFirstToolCall(t *testing.T, g nsOpenCodeGen) {
	bin := g.bin(t)
	ns := newNetns(t)
	home := hermeticHome(t)
	p := newProject(t, nil)
	const password = "netchange-password"
	env := g.env(home, password)

	// The remote MCP server, behind the proxy.
	serverPort := freePort(t)
	serverOut := &ochost.Buffer{}
	nsStart(t, ns, env, serverOut, mcpServerBin, "-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", serverPort), "-name", "rem", "-log", p.ServerLog("rem"))
	waitFor(t, 10*time.Second, "the MCP server listening", func() bool { return strings.Contains(serverOut.String(), "listening") })
	proxy := startResetProxy(t, ns, fmt.Sprintf("127.0.0.1:%d", serverPort))

	// The scripted model, in the namespace too.
	model := &fakeModel{tool: "rem_echo"}
	ms := httptest.NewUnstartedServer(http.HandlerFunc(model.serve))
	ms.Listener.Close()
	ms.Listener = nsListen(t, ns, "127.0.0.1:0")
	ms.Start()
	t.Cleanup(ms.Close)
	g.configure(t, p.Dir, ms.URL, "http://"+proxy.addr()+"/mcp")

	port := freePort(t)
	ocOut := &ochost.Buffer{}
	nsStart(t, ns, env, ocOut, bin, "serve", "--port", fmt.Sprint(port), "--hostname", "127.0.0.1")
	defer func() {
		if t.Failed() {
			t.Logf("opencode output:\n%s", ocOut)
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := nsClient(t, ns)
	waitFor(t, 60*time.Second, "opencode answering", func() bool {
		// A fresh OpenCode may hang a request in its first half second
		// (docs/opencode.md): each look is short.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+g.ready, nil)
		req.SetBasicAuth("opencode", password)
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	waitFor(t, 30*time.Second, "the remote MCP server connected", func() bool {
		return g.status(t, c, base, password, p.Dir)["rem"] == "connected"
	})
	// 2.1.2 registers the tools about 0.25 s after it says connected
	// (opencode-v2-facts.md §7.2).
	time.Sleep(time.Second)
	call := func(what string) (string, string) {
		t.Helper()
		st, out := g.prompt(t, c, base, password, p.Dir)
		t.Logf("%s: tool call %s: %.200s", what, st, out)
		return st, out
	}
	if st, out := call("first call"); st != "completed" || !strings.Contains(out, "hello") {
		t.Fatalf("first call: %s %q", st, out)
	}

	// OpenCode alone: the connections reset, and the next call fails.
	if n := proxy.cut(); n == 0 {
		t.Fatal("setup: OpenCode holds no connection to the remote server")
	}
	if st, out := call("OpenCode alone, after the reset"); st == "completed" {
		t.Fatalf("OpenCode alone completed the first tool call after its connections were reset (%q): the premise changed; re-check the facts", out)
	}
	recovered := false // OpenCode gets over it by itself after a failed call or two
	for range 3 {
		if st, _ := call("OpenCode alone, again"); st == "completed" {
			recovered = true
			break
		}
	}
	if !recovered {
		t.Fatal("setup: OpenCode alone did not recover from the reset within three calls")
	}

	// With mcp-reconnect watching: the same reset, and a network change.
	logs := &ochost.Buffer{}
	nsStart(t, ns, env, logs, reconnectBin, "watch", "--url", base, "--directory", p.Dir,
		"--status-addr", "", "--log-level", "debug", "--config", "")
	defer func() {
		if t.Failed() {
			t.Logf("watch output:\n%s", logs)
		}
	}()
	waitFor(t, 30*time.Second, "the daemon watching", func() bool { return strings.Contains(logs.String(), "watching opencode") })
	time.Sleep(3 * time.Second) // its first check; its endpoint watch holds a connection through the proxy too
	if n := proxy.cut(); n == 0 {
		t.Fatal("setup: OpenCode holds no connection to the remote server")
	}
	changed := time.Now()
	nsRun(t, ns, "ip", "link", "add", "vpn0", "type", "veth", "peer", "name", "vpn1")
	nsRun(t, ns, "ip", "addr", "add", "198.51.100.7/24", "dev", "vpn0")
	nsRun(t, ns, "ip", "link", "set", "vpn0", "up")
	waitFor(t, 10*time.Second, "the daemon seeing the network change", func() bool {
		return strings.Contains(logs.String(), `msg="network changed"`)
	})
	// What it does about it is the tool call's to judge: give it time.
	renewed := func() bool {
		i := strings.Index(logs.String(), "reconnecting a remote MCP server for a fresh session")
		return i >= 0 && strings.Contains(logs.String()[i:], "reconnected MCP server")
	}
	for deadline := time.Now().Add(10 * time.Second); !renewed() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("renewed: %v, %v after the change", renewed(), time.Since(changed))
	if st, out := call("with mcp-reconnect, the first call after the change"); st != "completed" || !strings.Contains(out, "hello") {
		t.Fatalf("with mcp-reconnect, the first tool call after the network change: %s %q", st, out)
	}
	if strings.Contains(logs.String(), password) {
		t.Error("the password appears in the daemon's output")
	}
}
