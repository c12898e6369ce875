package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// A session driven as a user drives one, on either generation, with a
// scripted model in place of a real one: what a test needs to pin the
// user's real outcome, a tool call that works in a running session. The
// helpers, for any test:
//
//	m := newFakeModel(t, "s")                       // calls s's echo tool
//	oc := g.start(t, ochost.Options{Env: m.Env(g)}) // OpenCode uses it
//	c := newChat(t, oc, p.Dir)                      // a session in p (newChatVia: another http.Client)
//	c = openProject(t, oc, p.Dir)                   // or: p's MCP servers read, then a session
//	time.Sleep(userPause)                           // s connected: the user types
//	err := c.Echo(t, p, m, "one")                   // "": s's newest process echoed "one"
//	call := c.Prompt(t, "two")                      // or: the turn's tool call, to judge
//
// The model is configured the way a user configures a custom provider, in
// OpenCode's config (here OPENCODE_CONFIG_CONTENT, the user's layer),
// while the MCP servers stay in the project's config (rewriteProject). A
// test that serves the model itself (in a network namespace) passes
// m.serve to its own server: &fakeModel{tool: "s_echo"} needs nothing
// else.

// fakeModel is an OpenAI-compatible chat-completions endpoint on
// loopback (OpenCode's bundled @ai-sdk/openai-compatible provider talks
// to it) that answers each new prompt, whose text is a word W, by calling
// its MCP server's echo tool with W, as a model would: by name
// (SERVER_echo) when OpenCode offers the tool so (1.x; 2.x with
// "codemode": false), or through Code Mode's one execute tool when
// tools.SERVER.echo is in Code Mode's catalog (2.x's default; see
// inCatalog). Given the tool's result it answers "done". Offered
// neither, it answers in text, and the turn has no tool call: the tool is
// gone from the session.
type fakeModel struct {
	// URL is where it listens (newFakeModel).
	URL string
	// tool is the tool it calls by name, SERVER_echo; in Code Mode it
	// calls tools.SERVER.echo.
	tool string
	srv  *httptest.Server
	mu   sync.Mutex
	// offered records, per new prompt, whether the tool was offered.
	offered map[string]bool
}

// newFakeModel serves a model that calls server's echo tool (server's
// name is one OpenCode keeps in the tool's name: letters, digits, _ and -).
func newFakeModel(t testing.TB, server string) *fakeModel {
	t.Helper()
	m := &fakeModel{tool: server + "_echo"}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	m.URL = m.srv.URL
	t.Cleanup(m.srv.Close)
	return m
}

// Env is the environment that makes an OpenCode of generation g use the
// model (OPENCODE_CONFIG_CONTENT), in g's words: 1.x "provider" with
// "npm" and "options"; 2.x "providers" with "package" and "settings",
// and "permissions" that allow every tool (2.x asks before an MCP tool
// call; nobody would answer).
func (m *fakeModel) Env(g gen) []string {
	base := m.URL + "/v1"
	cfg := map[string]any{"model": "fake/m"}
	if g.Gen == ochost.Gen2 {
		cfg["providers"] = map[string]any{"fake": map[string]any{"name": "Fake", "package": "@ai-sdk/openai-compatible",
			"settings": map[string]any{"baseURL": base, "apiKey": "x"},
			"models":   map[string]any{"m": map[string]any{"name": "m", "capabilities": map[string]any{"tools": true}}}}}
		cfg["permissions"] = []any{map[string]any{"action": "*", "resource": "*", "effect": "allow"}}
	} else {
		cfg["$schema"] = "https://opencode.ai/config.json"
		cfg["provider"] = map[string]any{"fake": map[string]any{"npm": "@ai-sdk/openai-compatible",
			"options": map[string]any{"baseURL": base, "apiKey": "x"},
			"models":  map[string]any{"m": map[string]any{"name": "m", "tool_call": true}}}}
	}
	b, _ := json.Marshal(cfg)
	return []string{"OPENCODE_CONFIG_CONTENT=" + string(b)}
}

// Offered says whether the model was offered the tool when it was
// prompted with word.
func (m *fakeModel) Offered(word string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offered[word]
}

// server is the MCP server whose echo tool the model calls.
func (m *fakeModel) server() string { return strings.TrimSuffix(m.tool, "_echo") }

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "not a chat completion request", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	defer fmt.Fprint(w, "data: [DONE]\n\n")
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		chunk(map[string]any{"role": "assistant", "content": "done"}, nil)
		chunk(map[string]any{}, "stop")
		return
	}
	word := messageText(last.Content)
	var catalog []string
	for _, msg := range req.Messages {
		if text := messageText(msg.Content); msg.Role == "system" || strings.HasPrefix(text, "<system-update>") {
			catalog = append(catalog, text)
		}
	}
	byName, execute := false, false
	for _, tool := range req.Tools {
		byName = byName || tool.Function.Name == m.tool
		execute = execute || tool.Function.Name == "execute"
	}
	var name, args string
	switch {
	case byName:
		name, args = m.tool, mustMarshal(map[string]string{"text": word})
	case execute && inCatalog(catalog, "tools."+m.server()+".echo"):
		code := fmt.Sprintf("return await tools.%s.echo({text: %s})", m.server(), mustMarshal(word))
		name, args = "execute", mustMarshal(map[string]string{"code": code})
	}
	m.mu.Lock()
	if m.offered == nil {
		m.offered = map[string]bool{}
	}
	m.offered[word] = name != ""
	m.mu.Unlock()
	if name == "" {
		chunk(map[string]any{"role": "assistant", "content": "I have no tool to echo with."}, nil)
		chunk(map[string]any{}, "stop")
		return
	}
	chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", time.Now().UnixNano()), "type": "function",
		"function": map[string]any{"name": name, "arguments": args}}}}, nil)
	chunk(map[string]any{}, "tool_calls")
}

// inCatalog says whether tool is in Code Mode's catalog as the model last
// heard of it: its system prompt lists the tools ("tools.S.T({…}):
// …"), and user messages "<system-update> The Code Mode tool catalog has
// changed" add some ("New tools are available …", listed alike) and take
// some away ("The following tools are no longer available and must not
// be called: tools.S.T, …").
func inCatalog(catalog []string, tool string) bool {
	in := false
	for _, text := range catalog {
		for _, line := range strings.Split(text, "\n") {
			switch {
			case strings.Contains(line, "no longer available") && strings.Contains(line, tool):
				in = false
			case strings.Contains(line, tool+"("):
				in = true
			}
		}
	}
	return in
}

// messageText is a chat message's text: a string, or the text parts of a
// list of parts.
func messageText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// chat is one session in a project directory of a running OpenCode,
// driven through its API as a client drives it, in its generation's
// words: 1.x POST /session, POST /session/ID/message (which returns when
// the turn is done), GET /session/ID/message; 2.x POST /api/session, POST
// /api/session/ID/prompt, POST /api/experimental/session/ID/wait (204
// when the turn is done), GET /api/session/ID/message.
type chat struct {
	oc     *OpenCode
	dir    string
	client *http.Client
	// ID is the session's.
	ID string
}

// toolCall is the tool call a turn made; zero when it made none.
type toolCall struct {
	// Tool is the tool the model called (SERVER_echo, or execute in
	// Code Mode).
	Tool string
	// Status is OpenCode's word for how the call ended (1.x completed or
	// error; 2.x completed or error too).
	Status string
	// Output is what the call returned, or its error.
	Output string
}

// Completed says the call ran to completion (its output may still be a
// failure a Code Mode script caught: check Output too).
func (c toolCall) Completed() bool { return c.Status == "completed" }

// newChat creates a session in dir, as a client does when a user opens
// one.
func newChat(t testing.TB, oc *OpenCode, dir string) *chat {
	t.Helper()
	return newChatVia(t, http.DefaultClient, oc, dir)
}

// newChatVia is newChat whose requests go through client (one that dials
// into a network namespace, say). An OpenCode the test did not start is
// &OpenCode{OpenCode: &ochost.OpenCode{URL: u, Password: pw, Gen: g.Gen}}.
func newChatVia(t testing.TB, client *http.Client, oc *OpenCode, dir string) *chat {
	t.Helper()
	c := &chat{oc: oc, dir: dir, client: client}
	var sess struct {
		ID   string `json:"id"`
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if oc.Gen == ochost.Gen2 {
		_ = json.Unmarshal(c.do(t, "POST", "/api/session", map[string]any{"title": "e2e", "location": map[string]string{"directory": dir}}), &sess)
		c.ID = sess.Data.ID
	} else {
		_ = json.Unmarshal(c.do(t, "POST", "/session", map[string]any{"title": "e2e"}), &sess)
		c.ID = sess.ID
	}
	if c.ID == "" {
		t.Fatalf("OpenCode created a session without an id")
	}
	return c
}

// openProject does what a user's client does on opening project
// directory dir: it reads dir's MCP servers, which starts them (1.x
// creates the directory's instance, 2.x boots its location), and creates
// a session there. Creating a session alone is not using MCP on 2.x: it
// boots no location, and the daemon, armed by session.created, finds
// none booted and leaves the directory alone.
func openProject(t testing.TB, oc *OpenCode, dir string) *chat {
	t.Helper()
	oc.Status(t, dir)
	return newChat(t, oc, dir)
}

// Prompt sends word as the user's prompt, waits until OpenCode has ended
// the turn, and returns the tool call the turn made (word must be new in
// the session: it finds the turn).
func (c *chat) Prompt(t testing.TB, word string) toolCall {
	t.Helper()
	if c.oc.Gen == ochost.Gen2 {
		c.do(t, "POST", "/api/session/"+c.ID+"/prompt", map[string]any{"text": word})
		c.do(t, "POST", "/api/experimental/session/"+c.ID+"/wait", map[string]any{})
		return c.turn2(t, word)
	}
	c.do(t, "POST", "/session/"+c.ID+"/message", map[string]any{"parts": []any{map[string]any{"type": "text", "text": word}}})
	return c.turn1(t, word)
}

// turn1 finds, in 1.x's messages ([{info: {role}, parts}]), the first
// tool part after the user's message word.
func (c *chat) turn1(t testing.TB, word string) toolCall {
	t.Helper()
	var msgs []struct {
		Info struct {
			Role string `json:"role"`
		} `json:"info"`
		Parts []struct {
			Type  string `json:"type"`
			Text  string `json:"text"`
			Tool  string `json:"tool"`
			State struct {
				Status string `json:"status"`
				Output string `json:"output"`
				Error  string `json:"error"`
			} `json:"state"`
		} `json:"parts"`
	}
	b := c.do(t, "GET", "/session/"+c.ID+"/message", nil)
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatalf("the session's messages: %v: %.500s", err, b)
	}
	seen := false
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch {
			case m.Info.Role == "user" && p.Type == "text" && p.Text == word:
				seen = true
			case seen && p.Type == "tool":
				return toolCall{Tool: p.Tool, Status: p.State.Status, Output: p.State.Output + p.State.Error}
			}
		}
	}
	if !seen {
		t.Fatalf("the session has no user message %q: %.1000s", word, b)
	}
	return toolCall{}
}

// turn2 finds, in 2.x's messages ({data: [{type, text, content}]}), the
// first tool item after the user's message word.
func (c *chat) turn2(t testing.TB, word string) toolCall {
	t.Helper()
	var msgs struct {
		Data []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Content []struct {
				Type  string `json:"type"`
				Name  string `json:"name"`
				Tool  string `json:"tool"`
				State struct {
					Status  string `json:"status"`
					Error   any    `json:"error"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"state"`
			} `json:"content"`
		} `json:"data"`
	}
	b := c.do(t, "GET", "/api/session/"+c.ID+"/message?order=asc&limit=200", nil)
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatalf("the session's messages: %v: %.500s", err, b)
	}
	seen := false
	for _, m := range msgs.Data {
		if m.Type == "user" && m.Text == word {
			seen = true
			continue
		}
		for _, it := range m.Content {
			if seen && it.Type == "tool" {
				var out strings.Builder
				for _, ct := range it.State.Content {
					out.WriteString(ct.Text)
				}
				if it.State.Error != nil {
					fmt.Fprint(&out, it.State.Error)
				}
				return toolCall{Tool: it.Name + it.Tool, Status: it.State.Status, Output: out.String()}
			}
		}
	}
	if !seen {
		t.Fatalf("the session has no user message %q: %.1000s", word, b)
	}
	return toolCall{}
}

// Echo prompts word in the session, as the user of a test server
// (p's, called m's server) does, and says why the turn did not echo it
// through that server: "" when the model was offered the tool, the call
// completed with word in its output, and the server's newest process
// logged the call.
func (c *chat) Echo(t testing.TB, p *Project, m *fakeModel, word string) string {
	t.Helper()
	calls := func() (n int) {
		pids := p.Starts(t, m.server())
		for _, ev := range p.ServerEvents(t, m.server()) {
			if ev.Event == "tool" && ev.Tool == "echo" && len(pids) > 0 && ev.PID == pids[len(pids)-1] {
				n++
			}
		}
		return n
	}
	before := calls()
	call := c.Prompt(t, word)
	switch {
	case !m.Offered(word):
		return fmt.Sprintf("the model was not offered %s's echo tool (the turn: %+v)", m.server(), call)
	case !call.Completed() || !strings.Contains(call.Output, word):
		return fmt.Sprintf("the call did not complete with %q: %+v", word, call)
	case calls() == before:
		return fmt.Sprintf("the call completed (%+v), but %s's newest process logged no call", call, m.server())
	}
	return ""
}

// userPause is how long a test of a session waits, once OpenCode says a
// server is connected (and the daemon has announced a repair), before it
// prompts: less than a user takes to see that and type. 2.1.2 offers a
// server's tools to a session's model only a moment after it says
// connected (measured here, prompting every 0.1 s after a connect
// returned: not offered at 0.2 to 0.3 s, offered from 0.3 to 1 s, by name
// and in Code Mode's catalog alike), 1.18.34 at once.
const userPause = 3 * time.Second

// do sends one request of the session's client, with the directory in
// the generation's words, and fails the test unless it succeeds.
func (c *chat) do(t testing.TB, method, path string, body any) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader([]byte(mustMarshal(body)))
	}
	key := "directory"
	if c.oc.Gen == ochost.Gen2 {
		key = "location[directory]"
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	req, err := http.NewRequestWithContext(ctx, method, c.oc.URL+path+sep+url.QueryEscape(key)+"="+url.QueryEscape(c.dir), rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("opencode", c.oc.Password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
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
