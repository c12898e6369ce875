package ochost

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
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
