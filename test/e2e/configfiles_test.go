package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/ochost"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// The config files as the real OpenCode reads them: every layer of
// opencode.ReadMCPConfig's 1.x rules written for a directory two levels
// below the top of a repository (a .git directory, a linked worktree's
// .git file, or none), OpenCode started with its own OPENCODE_CONFIG*
// variables, and its GET /config compared with ReadMCPConfig run with the
// environment read from the OpenCode process. Every pair of layers names
// one server in both, so the whole order is checked in one run; two more
// servers check that a later layer merges into an earlier one.
func TestConfigFilesAsOpenCodeReadsThem(t *testing.T) {
	needOpenCode(t)
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git missing under CI:", err)
		}
		t.Skip("git missing:", err)
	}
	root := t.TempDir()
	home := filepath.Join(root, "home")
	global := filepath.Join(home, "config", "opencode") // ochost.Env's XDG_CONFIG_HOME
	cdir := filepath.Join(root, "cdir")
	managed := filepath.Join(root, "managed")
	shared := map[string]string{
		"G_config.json": filepath.Join(global, "config.json"),
		"G_json":        filepath.Join(global, "opencode.json"),
		"G_jsonc":       filepath.Join(global, "opencode.jsonc"),
		"EXPLICIT":      filepath.Join(root, "explicit.json"),
		"HOME_dot":      filepath.Join(home, ".opencode", "opencode.json"),
		"CDIR_json":     filepath.Join(cdir, "opencode.json"),
		"CDIR_jsonc":    filepath.Join(cdir, "opencode.jsonc"),
		"MANAGED":       filepath.Join(managed, "opencode.json"),
		"CONTENT":       "",
	}
	// project's layers for a directory two levels below top, inside outer.
	project := func(outer string) (dir string, layers map[string]string) {
		top := filepath.Join(outer, "repo")
		dir = filepath.Join(top, "a", "b")
		return dir, map[string]string{
			"OUT_json":  filepath.Join(outer, "opencode.json"),
			"DOUT_json": filepath.Join(outer, ".opencode", "opencode.json"),
			"R_json":    filepath.Join(top, "opencode.json"),
			"R_jsonc":   filepath.Join(top, "opencode.jsonc"),
			"A_json":    filepath.Join(top, "a", "opencode.json"),
			"B_json":    filepath.Join(dir, "opencode.json"),
			"B_jsonc":   filepath.Join(dir, "opencode.jsonc"),
			"DR_json":   filepath.Join(top, ".opencode", "opencode.json"),
			"DR_jsonc":  filepath.Join(top, ".opencode", "opencode.jsonc"),
			"DA_json":   filepath.Join(top, "a", ".opencode", "opencode.json"),
			"DB_json":   filepath.Join(dir, ".opencode", "opencode.json"),
		}
	}
	_, every := project("")
	maps.Copy(every, shared)
	tags := slices.Sorted(maps.Keys(every))
	bodies := map[string]map[string]any{}
	for _, l := range tags {
		servers := map[string]any{"only_" + l: map[string]any{"type": "remote", "url": "http://127.0.0.1:9/x", "enabled": false}}
		for _, m := range tags {
			if m != l {
				servers["pair_"+min(l, m)+"_"+max(l, m)] = map[string]any{"type": "remote", "url": "http://127.0.0.1:9/" + l, "enabled": false}
			}
		}
		bodies[l] = servers
	}
	// A later layer merges into an earlier one.
	bodies["G_json"]["merge_m"] = map[string]any{"type": "remote", "url": "http://127.0.0.1:9/global", "enabled": false}
	bodies["R_json"]["merge_m"] = map[string]any{"type": "remote", "url": "http://127.0.0.1:9/project"}
	bodies["G_json"]["merge_p"] = map[string]any{"type": "local", "command": []string{"node", "p.js"}}
	bodies["B_jsonc"]["merge_p"] = map[string]any{"enabled": false}
	encode := func(l string) []byte {
		b, err := json.Marshal(map[string]any{"$schema": "https://opencode.ai/config.json", "mcp": bodies[l]})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(layers map[string]string) {
		for l, path := range layers {
			if path == "" {
				continue
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, encode(l), 0o600); err != nil {
				t.Fatal(err)
			}
			// No hidden npm install in the config directories OpenCode visits.
			if d := filepath.Dir(path); filepath.Base(d) == ".opencode" || d == global || d == cdir {
				if err := ochost.SeedConfigDir(d); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	write(shared)
	git := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	dirs := map[string]string{}
	for _, repo := range []string{"git", "worktree", "none"} {
		outer := filepath.Join(root, repo, "outer")
		dir, layers := project(outer)
		switch repo {
		case "git":
			git("init", "-q", filepath.Dir(filepath.Dir(dir)))
		case "worktree":
			main := filepath.Join(root, repo, "main")
			git("init", "-q", main)
			git("-C", main, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x")
			if err := os.MkdirAll(outer, 0o700); err != nil {
				t.Fatal(err)
			}
			git("-C", main, "worktree", "add", "-q", filepath.Dir(filepath.Dir(dir)))
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		write(layers)
		dirs[repo] = dir
	}

	oc, err := ochost.Start(ochost.Options{Binary: opencodeBin, Home: home, Env: []string{
		"OPENCODE_CONFIG=" + shared["EXPLICIT"],
		"OPENCODE_CONFIG_DIR=" + cdir,
		"OPENCODE_CONFIG_CONTENT=" + string(encode("CONTENT")),
		"OPENCODE_TEST_MANAGED_CONFIG_DIR=" + managed,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oc.Kill)
	// Ours, with the OpenCode process's own environment.
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	env := opencode.OwnConfigEnv(opencode.V1)
	if env.Local, err = procview.SameMountNamespace(oc.PID()); err != nil || !env.Local {
		t.Fatalf("OpenCode's mount namespace: %v, %v", env.Local, err)
	}
	getenv, ok := procview.OpenCodeEnv(tab, oc.PID())
	if !ok {
		t.Fatal("OpenCode's environment cannot be read")
	}
	env.Getenv = getenv

	for _, repo := range []string{"git", "worktree", "none"} {
		t.Run(repo, func(t *testing.T) {
			dir := dirs[repo]
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			code, body, err := oc.Do(ctx, "GET", "/config", dir)
			if err != nil || code != 200 {
				t.Fatalf("GET /config: %d %v %.300s", code, err, body)
			}
			var theirs struct {
				MCP map[string]opencode.MCPEntry `json:"mcp"`
			}
			if err := json.Unmarshal(body, &theirs); err != nil {
				t.Fatal(err)
			}
			ours, err := opencode.ReadMCPConfig(dir, env)
			if err != nil {
				t.Fatal(err)
			}
			show := func(e opencode.MCPEntry) string {
				en := "unset"
				if e.Enabled != nil {
					en = fmt.Sprint(*e.Enabled)
				}
				return fmt.Sprintf("{%s %s %q enabled=%s}", e.Type, e.URL, e.Command, en)
			}
			all := maps.Clone(ours)
			maps.Copy(all, theirs.MCP)
			for _, name := range slices.Sorted(maps.Keys(all)) {
				if a, b := show(theirs.MCP[name]), show(ours[name]); a != b {
					t.Errorf("%s: OpenCode %s, ReadMCPConfig %s", name, a, b)
				}
			}
			var read []string
			for _, l := range tags {
				if _, ok := theirs.MCP["only_"+l]; ok {
					read = append(read, l)
				}
			}
			t.Logf("OpenCode read %d of %d layers (%v); %d servers agree", len(read), len(tags), read, len(theirs.MCP))
		})
	}
}
