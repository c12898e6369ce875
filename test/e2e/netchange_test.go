//go:build linux

// Network namespaces (ip netns, setns) exist only on Linux.

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
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

// nsDriver is what the test does differently on each OpenCode generation
// (gen, generations_test.go) running in a namespace, beyond what the
// namespace helpers say (nsServe, nsStatus): how it is configured with
// the scripted model and one remote MCP server, and prompted. The
// assertions are the same on every generation.
type nsDriver struct {
	// configure writes dir's config: the scripted model at modelURL and
	// the remote MCP server "rem" at remoteURL.
	configure func(t *testing.T, dir, modelURL, remoteURL string)
	// prompt sends one prompt in a new session in dir and returns the
	// state and output of the tool part it recorded.
	prompt func(t *testing.T, c *http.Client, base, password, dir string) (status, output string)
}

// nsDrivers are the drivers by generation.
var nsDrivers = map[ochost.Generation]nsDriver{
	ochost.Gen1: {configure: configure1, prompt: nsPrompt1},
	ochost.Gen2: {configure: configure2, prompt: nsPrompt2},
}

// configure1 writes a 1.x project config (opencode-facts.md, "Driving a
// real prompt").
func configure1(t *testing.T, dir, modelURL, remoteURL string) {
	writeConfig(t, filepath.Join(dir, ochost.Gen1.ConfigFile()), map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"fake": map[string]any{"npm": "@ai-sdk/openai-compatible",
			"options": map[string]any{"baseURL": modelURL + "/v1", "apiKey": "x"},
			"models":  map[string]any{"m": map[string]any{"name": "m", "tool_call": true}}}},
		"model": "fake/m",
		"mcp":   map[string]any{"rem": RemoteServer(remoteURL)},
	})
}

// configure2 writes a 2.x project config (opencode-v2-facts.md §7.2).
// Code Mode off: the model sees the MCP tools themselves.
func configure2(t *testing.T, dir, modelURL, remoteURL string) {
	writeConfig(t, filepath.Join(dir, ochost.Gen2.ConfigFile()), map[string]any{
		"providers": map[string]any{"fake": map[string]any{"name": "Fake", "package": "@ai-sdk/openai-compatible",
			"settings": map[string]any{"baseURL": modelURL + "/v1", "apiKey": "x"},
			"models":   map[string]any{"m": map[string]any{"name": "m", "capabilities": map[string]any{"tools": true}}}}},
		"model":       "fake/m",
		"permissions": []any{map[string]any{"action": "*", "resource": "*", "effect": "allow"}},
		"mcp":         map[string]any{"servers": map[string]any{"rem": map[string]any{"type": "remote", "url": remoteURL, "codemode": false}}},
	})
}

func writeConfig(t *testing.T, file string, cfg map[string]any) {
	t.Helper()
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// nsPrompt1 drives one prompt on OpenCode 1.x (opencode-facts.md,
// "Driving a real prompt"): a session, its message (which returns after
// the whole turn), then its messages.
func nsPrompt1(t *testing.T, c *http.Client, base, password, dir string) (status, output string) {
	t.Helper()
	var sess struct{ ID string }
	_ = json.Unmarshal(nsRequest(t, c, ochost.Gen1, "POST", base, "/session", dir, password, map[string]any{"title": "e2e"}), &sess)
	nsRequest(t, c, ochost.Gen1, "POST", base, "/session/"+sess.ID+"/message", dir, password,
		map[string]any{"parts": []any{map[string]any{"type": "text", "text": "echo hello"}}})
	raw := nsRequest(t, c, ochost.Gen1, "GET", base, "/session/"+sess.ID+"/message", dir, password, nil)
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
	_ = json.Unmarshal(raw, &msgs)
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "tool" {
				return p.State.Status, p.State.Output + p.State.Error
			}
		}
	}
	t.Fatalf("no tool part in the session: %s", raw)
	return "", ""
}

// nsPrompt2 drives one prompt on OpenCode 2.1.2 (opencode-v2-facts.md
// §7.2): a session, its prompt, a wait for the turn, then its messages.
func nsPrompt2(t *testing.T, c *http.Client, base, password, dir string) (status, output string) {
	t.Helper()
	var sess struct {
		Data struct{ ID string } `json:"data"`
	}
	_ = json.Unmarshal(nsRequest(t, c, ochost.Gen2, "POST", base, "/api/session", dir, password,
		map[string]any{"title": "e2e", "location": map[string]any{"directory": dir}}), &sess)
	nsRequest(t, c, ochost.Gen2, "POST", base, "/api/session/"+sess.Data.ID+"/prompt", dir, password, map[string]any{"text": "echo hello"})
	nsRequest(t, c, ochost.Gen2, "POST", base, "/api/experimental/session/"+sess.Data.ID+"/wait", dir, password, map[string]any{})
	raw := nsRequest(t, c, ochost.Gen2, "GET", base, "/api/session/"+sess.Data.ID+"/message?order=asc&limit=200", dir, password, nil)
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
// OpenCode alone failing so. With mcp-reconnect watching, a bridge coming
// up beside the way out (docker's) renews nothing: it kills no connection.
// The network change a VPN makes (its tunnel, its address, the default
// route through it, in the daemon's namespace) renews the remote session,
// and the first tool call after the change completes. Everything runs in
// a network namespace of its own: OpenCode, the MCP server, the proxy
// that resets, the scripted model and the daemon.
func TestNetworkChangeFirstToolCallWorks(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) { networkChangeFirstToolCall(t, g, nsDrivers[g.Gen]) })
}

func networkChangeFirstToolCall(t *testing.T, g gen, d nsDriver) {
	ns := newNetns(t)
	home := g.newHome(t)
	p := g.newProject(t, nil)
	const password = "netchange-password"
	env := nsEnv(g, home, password)

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
	d.configure(t, p.Dir, ms.URL, "http://"+proxy.addr()+"/mcp")

	base, c := nsServe(t, ns, g, env, password)
	waitFor(t, 30*time.Second, "the remote MCP server connected", func() bool {
		return nsStatus(t, c, g, base, password, p.Dir)["rem"] == "connected"
	})
	// 2.1.2 registers the tools about 0.25 s after it says connected
	// (opencode-v2-facts.md §7.2).
	time.Sleep(time.Second)
	call := func(what string) (string, string) {
		t.Helper()
		st, out := d.prompt(t, c, base, password, p.Dir)
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
	const renewing = "reconnecting a remote MCP server for a fresh session"
	nsRun(t, ns, "ip", "link", "add", "docker0", "type", "bridge")
	nsRun(t, ns, "ip", "addr", "add", "172.17.0.1/16", "dev", "docker0")
	nsRun(t, ns, "ip", "link", "set", "docker0", "up")
	waitFor(t, 10*time.Second, "the daemon seeing the bridge", func() bool {
		return strings.Contains(logs.String(), `msg="network changed" uplink=false`)
	})
	time.Sleep(3 * time.Second) // a renewal would come initial-delay (1 s) after the change
	if strings.Contains(logs.String(), renewing) {
		t.Fatal("a bridge coming up beside the way out renewed the remote session")
	}
	if n := proxy.cut(); n == 0 {
		t.Fatal("setup: OpenCode holds no connection to the remote server")
	}
	changed := time.Now()
	nsRun(t, ns, "ip", "link", "add", "vpn0", "type", "veth", "peer", "name", "vpn1")
	nsRun(t, ns, "ip", "link", "set", "vpn1", "up")
	nsRun(t, ns, "ip", "link", "set", "vpn0", "up")
	nsRun(t, ns, "ip", "addr", "add", "198.51.100.7/24", "dev", "vpn0")
	nsRun(t, ns, "ip", "route", "add", "default", "via", "198.51.100.1", "dev", "vpn0")
	waitFor(t, 10*time.Second, "the daemon seeing the VPN", func() bool {
		return strings.Contains(logs.String(), `msg="network changed" uplink=true`)
	})
	// What it does about it is the tool call's to judge: give it time.
	renewed := func() bool {
		i := strings.Index(logs.String(), renewing)
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
