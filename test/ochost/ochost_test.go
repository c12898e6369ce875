package ochost

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

func TestParseVersionTellsTheGenerations(t *testing.T) {
	for out, want := range map[string]Generation{"1.18.34\n": Gen1, "1.1.65": Gen1, "opencode v2.1.2\n": Gen2, "2.0.21": Gen2} {
		g, _, err := parseVersion(out)
		if err != nil || g != want {
			t.Errorf("parseVersion(%q) = %v, %v; want %v", out, g, err, want)
		}
	}
	for _, out := range []string{"", "opencode", "v0.9.1", "banner\n1.18.34"} {
		if g, _, err := parseVersion(out); err == nil {
			t.Errorf("parseVersion(%q) = %v, want an error", out, g)
		}
	}
}

func TestWriteConfigInEachGenerationsShape(t *testing.T) {
	local := map[string]any{"type": "local", "command": []string{"srv"}}
	for _, c := range []struct {
		g    Generation
		want string
	}{
		{Gen1, `{"$schema":"https://opencode.ai/config.json","mcp":{"off":{"command":["srv"],"enabled":false,"type":"local"},"on":{"command":["srv"],"type":"local"}}}`},
		{Gen2, `{"mcp":{"servers":{"off":{"command":["srv"],"disabled":true,"type":"local"},"on":{"command":["srv"],"type":"local"}}}}`},
	} {
		dir := t.TempDir()
		if err := c.g.WriteConfig(dir, map[string]any{"on": local, "off": c.g.Disabled(local)}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, c.g.ConfigFile()))
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		_ = json.Unmarshal(b, &got)
		_ = json.Unmarshal([]byte(c.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s config:\n%s\nwant %s", c.g, b, c.want)
		}
		if _, ok := local["enabled"]; ok {
			t.Fatal("Disabled changed the config it was given")
		}
	}
}

// Each generation ignores the other's disabled mark: a server marked so
// would start, so the mark is refused.
func TestWriteConfigRefusesTheOtherGenerationsDisabledMark(t *testing.T) {
	local := map[string]any{"type": "local", "command": []string{"srv"}}
	if err := Gen2.WriteConfig(t.TempDir(), map[string]any{"off": Gen1.Disabled(local)}); err == nil {
		t.Error("2.x config with enabled:false written")
	}
	if err := Gen1.WriteConfig(t.TempDir(), map[string]any{"off": Gen2.Disabled(local)}); err == nil {
		t.Error("1.x config with disabled:true written")
	}
}

// An empty list is a booting 2.x location unless its config names no
// server; a pending server has not been tried yet.
func TestSettled(t *testing.T) {
	for _, c := range []struct {
		st    map[string]MCPStatus
		names []string
		want  bool
	}{
		{map[string]MCPStatus{}, []string{"a"}, false},
		{map[string]MCPStatus{}, nil, true},
		{map[string]MCPStatus{"a": {Status: "pending"}}, []string{"a"}, false},
		{map[string]MCPStatus{"a": {Status: "failed"}}, []string{"a", "b"}, false},
		{map[string]MCPStatus{"a": {Status: "failed"}, "b": {Status: "disabled"}}, []string{"a", "b"}, true},
	} {
		if got := settled(c.st, c.names); got != c.want {
			t.Errorf("settled(%v, %v) = %v, want %v", c.st, c.names, got, c.want)
		}
	}
}

// A value a test makes by hand (no generation) reads 1.x's map.
func TestStatusOfAHandMadeValueIsOneX(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" || r.URL.Query().Get("directory") != "/p q" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"s":{"status":"failed","error":"boom"}}`))
	}))
	defer srv.Close()
	st, err := (&OpenCode{URL: srv.URL}).Status("/p q")
	if err != nil || st["s"] != (MCPStatus{"failed", "boom"}) {
		t.Fatalf("Status = %+v, %v", st, err)
	}
}

// 2.x answers a booting location with an empty list, then "pending":
// Status reads on until the servers the config names are listed and
// tried, as 1.x's read answers only then.
func TestStatusWaitsOutABootingLocation(t *testing.T) {
	reads := [][]byte{
		[]byte(`{"location":{"directory":"/p"},"data":[]}`),
		[]byte(`{"location":{"directory":"/p"},"data":[{"name":"a","status":{"status":"pending"}},{"name":"b","status":{"status":"disabled"}}]}`),
		[]byte(`{"location":{"directory":"/p"},"data":[{"name":"a","status":{"status":"connected"}},{"name":"b","status":{"status":"disabled"}}]}`),
	}
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("location[directory]") != "/p" {
			http.NotFound(w, r)
			return
		}
		switch r.URL.Path {
		case "/api/config":
			_, _ = w.Write([]byte(`[{"type":"directory","path":"/c"},{"type":"document","path":"/p/opencode.jsonc","info":{"mcp":{"servers":{"a":{},"b":{}}}}}]`))
		case "/api/mcp":
			mu.Lock()
			defer mu.Unlock()
			_, _ = w.Write(reads[min(n, len(reads)-1)])
			n++
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	st, err := (&OpenCode{URL: srv.URL, Gen: Gen2}).Status("/p")
	if err != nil || st["a"].Status != "connected" || st["b"].Status != "disabled" || n != 3 {
		t.Fatalf("Status = %+v, %v after %d reads", st, err, n)
	}
}
