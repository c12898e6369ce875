package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeModel is an OpenAI-compatible chat-completions endpoint on loopback
// that scripts one tool call: asked without a tool result, it calls the
// tool; asked with one, it answers in text.
type fakeModel struct {
	srv  *httptest.Server
	tool string
	mu   sync.Mutex
	text int
}

func newFakeModel(t *testing.T, tool string) *fakeModel {
	m := &fakeModel{tool: tool}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	toolResult := false
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			toolResult = true
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if toolResult && req.Messages[len(req.Messages)-1].Role == "tool" {
		chunk(map[string]any{"role": "assistant", "content": "done"}, nil)
		chunk(map[string]any{}, "stop")
	} else {
		chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", time.Now().UnixNano()), "type": "function",
			"function": map[string]any{"name": m.tool, "arguments": `{"text":"hello"}`}}}}, nil)
		chunk(map[string]any{}, "tool_calls")
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// prompt sends one prompt in a new session and returns the state and
// output of the tool part OpenCode recorded.
func prompt(t *testing.T, oc *OpenCode, dir string) (status, output string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	do := func(method, path string, body any) []byte {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(ctx, method, oc.URL+path+"?directory="+urlQueryEscape(dir), rd)
		req.SetBasicAuth("opencode", oc.Password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
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
			Tool  string `json:"tool"`
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

func urlQueryEscape(s string) string {
	r := strings.NewReplacer("%", "%25", " ", "%20", "&", "%26", "?", "%3F", "#", "%23", "+", "%2B")
	return r.Replace(s)
}

// The user's real outcome: OpenCode calls the remote server's echo tool
// through a real prompt; the server restarts; with mcp-reconnect the next
// call succeeds. What OpenCode alone does is recorded in the same test.
func TestToolCallSurvivesRemoteRestart(t *testing.T) {
	oc := startOpenCode(t, 0, "")
	p := newProject(t, nil)
	// -strict-sessions: like the TypeScript SDK's servers, the restarted
	// process answers OpenCode's old session id with 400, which OpenCode
	// does not recover from (a 404 it would).
	remote := newHTTPServer(t, p.ServerLog("rem"), "-strict-sessions")
	remote.Start(t)
	model := newFakeModel(t, "rem_echo")
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"fake": map[string]any{"npm": "@ai-sdk/openai-compatible",
			"options": map[string]any{"baseURL": model.srv.URL + "/v1", "apiKey": "x"},
			"models":  map[string]any{"m": map[string]any{"name": "m", "tool_call": true}}}},
		"model": "fake/m",
		"mcp":   map[string]any{"rem": RemoteServer(remote.URL)},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(p.Dir, "opencode.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, out := prompt(t, oc, p.Dir); st != "completed" || !strings.Contains(out, "hello") {
		t.Fatalf("first call: %s %q", st, out)
	}

	// OpenCode alone: the server restarts and OpenCode keeps its dead session.
	remote.Stop()
	remote.Start(t)
	st, out := prompt(t, oc, p.Dir)
	t.Logf("OpenCode alone, after a restart of the remote server: tool call %s: %.200s", st, out)
	if st == "completed" {
		t.Fatalf("OpenCode alone recovered from a restart (%q): the premise of stale-session repair changed; re-check the facts", out)
	}

	// With mcp-reconnect watching, the same restart is repaired.
	w := startWatch(t, oc, oc.Password, "--directory", p.Dir)
	w.WaitLog(t, "watching opencode", 15*time.Second)
	time.Sleep(3 * time.Second) // first check and the endpoint watch
	remote.Stop()
	time.Sleep(300 * time.Millisecond)
	remote.Start(t)
	w.WaitLog(t, "restarted behind OpenCode's back", 20*time.Second)
	time.Sleep(time.Second)
	if st, out := prompt(t, oc, p.Dir); st != "completed" || !strings.Contains(out, "hello") {
		t.Fatalf("with mcp-reconnect, after the restart: tool call %s: %q", st, out)
	}
}
