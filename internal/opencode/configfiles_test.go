package opencode_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// tree is a hermetic machine for config tests: a home, an XDG config
// home, a managed directory, and a project under root.
type tree struct {
	root, home, xdg, managed string
}

func newTree(t *testing.T) tree {
	t.Helper()
	root := t.TempDir()
	tr := tree{root: root, home: filepath.Join(root, "home"), xdg: filepath.Join(root, "xdg"), managed: filepath.Join(root, "managed")}
	for _, d := range []string{tr.home, tr.xdg, tr.managed} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// env is a ConfigEnv of gen whose variables are vars plus the tree's
// HOME, XDG_CONFIG_HOME and managed directory.
func (tr tree) env(gen opencode.Generation, vars ...string) opencode.ConfigEnv {
	m := map[string]string{"HOME": tr.home, "XDG_CONFIG_HOME": tr.xdg, "OPENCODE_TEST_MANAGED_CONFIG_DIR": tr.managed}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	return opencode.ConfigEnv{Local: true, Getenv: func(k string) string { return m[k] }, Generation: gen}
}

// write writes name (relative to the tree's root unless absolute).
func (tr tree) write(t *testing.T, name, body string) string {
	t.Helper()
	if !filepath.IsAbs(name) {
		name = filepath.Join(tr.root, name)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// gitRepo makes dir (relative to the root) the top of a repository.
func (tr tree) gitRepo(t *testing.T, dir string) string {
	t.Helper()
	d := filepath.Join(tr.root, dir)
	if err := os.MkdirAll(filepath.Join(d, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func (tr tree) mkdir(t *testing.T, dir string) string {
	t.Helper()
	d := filepath.Join(tr.root, dir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// remote is a config naming server s at a URL ending in tag, and a server
// only_TAG, in 1.x's shape.
func remote(tag string) string {
	return fmt.Sprintf(`{"mcp":{"s":{"type":"remote","url":"http://127.0.0.1:9/%s"},"only_%s":{"type":"remote","url":"http://127.0.0.1:9/x"}}}`, tag, tag)
}

// winner reads dir's config and returns the tag of server s's URL and the
// tags of every layer read.
func winner(t *testing.T, dir string, env opencode.ConfigEnv) (string, []string) {
	t.Helper()
	cfg, err := opencode.ReadMCPConfig(dir, env)
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	for name := range cfg {
		if tag, ok := strings.CutPrefix(name, "only_"); ok {
			read = append(read, tag)
		}
	}
	slices.Sort(read)
	return filepath.Base(cfg["s"].URL), read
}

// precedence removes the winning layer until none is left: the layers
// highest first.
func precedence(t *testing.T, dir string, env opencode.ConfigEnv, layers map[string]string) []string {
	t.Helper()
	var order []string
	for len(layers) > 0 {
		win, _ := winner(t, dir, env)
		path, ok := layers[win]
		if !ok {
			t.Fatalf("server s came from %q, not one of the layers left %v (order so far %v)", win, slices.Sorted(maps.Keys(layers)), order)
		}
		order = append(order, win)
		if path == "" { // the inline config
			prev := env.Getenv
			env.Getenv = func(k string) string {
				if k == "OPENCODE_CONFIG_CONTENT" {
					return ""
				}
				return prev(k)
			}
		} else if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		delete(layers, win)
	}
	return order
}

// allLayers writes server s into every layer either line reads for
// repo/a/b (repo the top of a repository inside outer/), and one more
// above the repository.
func allLayers(t *testing.T, tr tree) (dir string, layers map[string]string) {
	t.Helper()
	repo := tr.gitRepo(t, "outer/repo")
	dir = tr.mkdir(t, "outer/repo/a/b")
	layers = map[string]string{}
	for tag, path := range map[string]string{
		"G_config.json": filepath.Join(tr.xdg, "opencode", "config.json"),
		"G_json":        filepath.Join(tr.xdg, "opencode", "opencode.json"),
		"G_jsonc":       filepath.Join(tr.xdg, "opencode", "opencode.jsonc"),
		"EXPLICIT":      filepath.Join(tr.root, "explicit.json"),
		"OUT_json":      filepath.Join(tr.root, "outer", "opencode.json"),
		"R_json":        filepath.Join(repo, "opencode.json"),
		"R_jsonc":       filepath.Join(repo, "opencode.jsonc"),
		"A_json":        filepath.Join(repo, "a", "opencode.json"),
		"A_jsonc":       filepath.Join(repo, "a", "opencode.jsonc"),
		"B_json":        filepath.Join(dir, "opencode.json"),
		"B_jsonc":       filepath.Join(dir, "opencode.jsonc"),
		"DOUT_json":     filepath.Join(tr.root, "outer", ".opencode", "opencode.json"),
		"DR_json":       filepath.Join(repo, ".opencode", "opencode.json"),
		"DR_jsonc":      filepath.Join(repo, ".opencode", "opencode.jsonc"),
		"DA_json":       filepath.Join(repo, "a", ".opencode", "opencode.json"),
		"DB_json":       filepath.Join(dir, ".opencode", "opencode.json"),
		"HOME_dot":      filepath.Join(tr.home, ".opencode", "opencode.json"),
		"CDIR_json":     filepath.Join(tr.root, "cdir", "opencode.json"),
		"CDIR_jsonc":    filepath.Join(tr.root, "cdir", "opencode.jsonc"),
		"MANAGED":       filepath.Join(tr.managed, "opencode.json"),
	} {
		layers[tag] = tr.write(t, path, remote(tag))
	}
	layers["CONTENT"] = ""
	return dir, layers
}

// The whole order of OpenCode 1.18.34, as measured on the real binary
// (test/e2e TestConfigFilesAsOpenCodeReadsThem checks the same against it):
// the project files from the repository's top down, the .opencode
// directories from the directory up, nothing above the repository.
func TestConfigPrecedenceV1(t *testing.T) {
	tr := newTree(t)
	dir, layers := allLayers(t, tr)
	env := tr.env(opencode.V1, "OPENCODE_CONFIG", layers["EXPLICIT"], "OPENCODE_CONFIG_DIR", filepath.Join(tr.root, "cdir"), "OPENCODE_CONFIG_CONTENT", remote("CONTENT"))
	_, read := winner(t, dir, env)
	if slices.Contains(read, "OUT_json") || slices.Contains(read, "DOUT_json") {
		t.Errorf("layers above the repository were read: %v", read)
	}
	delete(layers, "OUT_json")
	delete(layers, "DOUT_json")
	want := []string{"MANAGED", "CONTENT", "CDIR_jsonc", "CDIR_json", "HOME_dot", "DR_jsonc", "DR_json", "DA_json", "DB_json", "B_jsonc", "B_json", "A_jsonc", "A_json", "R_jsonc", "R_json", "EXPLICIT", "G_jsonc", "G_json", "G_config.json"}
	if got := precedence(t, dir, env, layers); !slices.Equal(got, want) {
		t.Errorf("highest first:\n got %v\nwant %v", got, want)
	}
}

// The whole order of the v2 line (read in its source): the global
// directory is $OPENCODE_CONFIG_DIR, the walk goes to the file system
// root whatever the repository, and the nearest .opencode wins.
func TestConfigPrecedenceV2(t *testing.T) {
	tr := newTree(t)
	dir, layers := allLayers(t, tr)
	env := tr.env(opencode.V2, "OPENCODE_CONFIG", layers["EXPLICIT"], "OPENCODE_CONFIG_DIR", filepath.Join(tr.root, "cdir"), "OPENCODE_CONFIG_CONTENT", remote("CONTENT"))
	_, read := winner(t, dir, env)
	for _, tag := range []string{"G_config.json", "G_json", "G_jsonc", "HOME_dot", "MANAGED"} {
		if slices.Contains(read, tag) {
			t.Errorf("%s was read: 2.x reads no such layer (the global directory is $OPENCODE_CONFIG_DIR)", tag)
		}
		delete(layers, tag)
	}
	want := []string{"CONTENT", "DB_json", "DA_json", "DR_jsonc", "DR_json", "DOUT_json", "B_jsonc", "B_json", "A_jsonc", "A_json", "R_jsonc", "R_json", "OUT_json", "EXPLICIT", "CDIR_jsonc", "CDIR_json"}
	if got := precedence(t, dir, env, layers); !slices.Equal(got, want) {
		t.Errorf("highest first:\n got %v\nwant %v", got, want)
	}
}

// A TUI started in a subdirectory of a repository reads the config at the
// repository's top: doctor must find that directory's local servers (its
// orphans and duplicates), and so must the daemon on a 2.x server without
// /api/config.
func TestConfigOfASubdirectoryComesFromTheProjectRoot(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("OPENCODE_TEST_MANAGED_CONFIG_DIR", t.TempDir())
	t.Setenv("OPENCODE_CONFIG_DIR", "")
	t.Setenv("OPENCODE_CONFIG", "")
	t.Setenv("OPENCODE_CONFIG_CONTENT", "")
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(repo, "src", "app")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "opencode.json"), []byte(`{"mcp":{"fs":{"type":"local","command":["node","fs.js"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := opencode.OwnedMCPConfig(sub, os.Getuid()); len(got["fs"].Command) == 0 {
		t.Fatalf("the config of %s (a subdirectory of the repository whose root names server fs) = %+v; layers read: %v", sub, got, opencode.ConfigLayers(sub, opencode.OwnConfigEnv(opencode.V1)))
	}
	if got, _ := opencode.ReadMCPConfig(sub, opencode.OwnConfigEnv(opencode.V2)); len(got["fs"].Command) == 0 {
		t.Errorf("2.x: the config of %s = %+v", sub, got)
	}
}

// Found two levels up, by either line, and by 1.x outside a repository
// too (its walk then goes to the file system root).
func TestConfigTwoLevelsUp(t *testing.T) {
	for _, repo := range []bool{true, false} {
		tr := newTree(t)
		if repo {
			tr.gitRepo(t, "p")
		}
		dir := tr.mkdir(t, "p/a/b")
		tr.write(t, "p/opencode.jsonc", "// top\n"+remote("top"))
		tr.write(t, "p/.opencode/opencode.json", `{"mcp":{"dot":{"type":"local","command":["dot"]}}}`)
		for _, gen := range []opencode.Generation{opencode.V1, opencode.V2, opencode.GenUnknown} {
			cfg, err := opencode.ReadMCPConfig(dir, tr.env(gen))
			if err != nil {
				t.Fatal(err)
			}
			if cfg["s"].URL != "http://127.0.0.1:9/top" || len(cfg["dot"].Command) == 0 {
				t.Errorf("repository %v, %v: %+v", repo, gen, cfg)
			}
		}
	}
}

// 1.x stops at the nearest .git, a directory or a file (a linked
// worktree's, a submodule's); 2.x does not stop.
func TestConfigStopsAtTheRepositoryInV1Only(t *testing.T) {
	for _, gitFile := range []bool{false, true} {
		tr := newTree(t)
		wt := tr.mkdir(t, "outer/wt")
		if gitFile {
			tr.write(t, "outer/wt/.git", "gitdir: /somewhere/.git/worktrees/wt\n")
		} else {
			tr.gitRepo(t, "outer/wt")
		}
		dir := tr.mkdir(t, "outer/wt/sub")
		tr.write(t, "outer/opencode.json", remote("outer"))
		tr.write(t, "outer/.opencode/opencode.json", `{"mcp":{"dot":{"type":"local","command":["dot"]}}}`)
		tr.write(t, filepath.Join(wt, "opencode.json"), `{"mcp":{"top":{"type":"local","command":["top"]}}}`)
		v1, _ := opencode.ReadMCPConfig(dir, tr.env(opencode.V1))
		if _, ok := v1["top"]; !ok || v1["s"].URL != "" || v1["dot"].Type != "" {
			t.Errorf(".git file %v: 1.x read %+v, want the worktree's top only", gitFile, v1)
		}
		v2, _ := opencode.ReadMCPConfig(dir, tr.env(opencode.V2))
		if _, ok := v2["top"]; !ok || v2["s"].URL == "" || v2["dot"].Type == "" {
			t.Errorf(".git file %v: 2.x read %+v, want every level up", gitFile, v2)
		}
	}
}

// Each .opencode/ directory on the way is read, by 1.x from the
// directory up (the farthest wins), by 2.x from the top down (the nearest
// wins), in JSON and JSONC.
func TestConfigDotOpenCodeAtEachLevel(t *testing.T) {
	tr := newTree(t)
	tr.gitRepo(t, "r")
	dir := tr.mkdir(t, "r/a/b")
	tr.write(t, "r/.opencode/opencode.json", remote("r"))
	tr.write(t, "r/a/.opencode/opencode.jsonc", "{/* a */ \"mcp\": {\"s\": {\"type\": \"remote\", \"url\": \"http://127.0.0.1:9/a\",}, \"only_a\": {\"type\": \"local\", \"command\": [\"a\"]}}}")
	tr.write(t, "r/a/b/.opencode/opencode.json", remote("b"))
	for gen, want := range map[opencode.Generation]string{opencode.V1: "r", opencode.V2: "b"} {
		win, read := winner(t, dir, tr.env(gen))
		if win != want || !slices.Equal(read, []string{"a", "b", "r"}) {
			t.Errorf("%v: s from %q (want %q), layers read %v", gen, win, want, read)
		}
	}
}

// $OPENCODE_CONFIG_DIR: for 1.x a directory read after every other
// directory (the global one still read), for 2.x the global directory
// itself.
func TestConfigDirVariable(t *testing.T) {
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	tr.gitRepo(t, "p")
	cdir := filepath.Join(tr.root, "cdir")
	tr.write(t, filepath.Join(cdir, "opencode.jsonc"), "// cdir\n"+remote("cdir"))
	tr.write(t, filepath.Join(tr.xdg, "opencode", "opencode.json"), remote("xdg"))
	tr.write(t, "p/.opencode/opencode.json", remote("dot"))
	win, read := winner(t, dir, tr.env(opencode.V1, "OPENCODE_CONFIG_DIR", cdir))
	if win != "cdir" || !slices.Equal(read, []string{"cdir", "dot", "xdg"}) {
		t.Errorf("1.x: s from %q, layers %v", win, read)
	}
	win, read = winner(t, dir, tr.env(opencode.V2, "OPENCODE_CONFIG_DIR", cdir))
	if win != "dot" || !slices.Equal(read, []string{"cdir", "dot"}) {
		t.Errorf("2.x: s from %q, layers %v", win, read)
	}
	// 2.x reads a project directory that is also the global one once, as
	// the global one: lowest.
	tr.write(t, "p/opencode.json", remote("project"))
	win, _ = winner(t, dir, tr.env(opencode.V2, "OPENCODE_CONFIG_DIR", filepath.Join(dir, ".opencode")))
	if win != "project" {
		t.Errorf("2.x with the global directory inside the project: s from %q, want project's", win)
	}
}

// $OPENCODE_CONFIG: above the global files, below the project's.
func TestConfigFileVariable(t *testing.T) {
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	tr.gitRepo(t, "p")
	f := tr.write(t, "elsewhere/oc.json", remote("explicit"))
	tr.write(t, filepath.Join(tr.xdg, "opencode", "opencode.json"), remote("xdg"))
	for _, gen := range []opencode.Generation{opencode.V1, opencode.V2} {
		if win, read := winner(t, dir, tr.env(gen, "OPENCODE_CONFIG", f)); win != "explicit" || !slices.Equal(read, []string{"explicit", "xdg"}) {
			t.Errorf("%v: s from %q, layers %v", gen, win, read)
		}
		// A relative path is OpenCode's working directory's: unknown.
		if win, _ := winner(t, dir, tr.env(gen, "OPENCODE_CONFIG", "oc.json")); win != "xdg" {
			t.Errorf("%v, relative OPENCODE_CONFIG: s from %q", gen, win)
		}
	}
	tr.write(t, "p/opencode.json", remote("project"))
	for _, gen := range []opencode.Generation{opencode.V1, opencode.V2} {
		if win, _ := winner(t, dir, tr.env(gen, "OPENCODE_CONFIG", f)); win != "project" {
			t.Errorf("%v: s from %q, want the project's", gen, win)
		}
	}
}

// $OPENCODE_CONFIG_CONTENT, JSON or JSONC, above every file but 1.x's
// managed directory.
func TestConfigContentVariable(t *testing.T) {
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	tr.gitRepo(t, "p")
	tr.write(t, "p/opencode.json", remote("project"))
	tr.write(t, "p/.opencode/opencode.json", remote("dot"))
	for _, content := range []string{remote("content"), "{\n// JSONC\n\"mcp\": {\"servers\": {\"s\": {\"type\": \"remote\", \"url\": \"http://127.0.0.1:9/content\",},},},\n}"} {
		for _, gen := range []opencode.Generation{opencode.V1, opencode.V2} {
			if win, _ := winner(t, dir, tr.env(gen, "OPENCODE_CONFIG_CONTENT", content)); win != "content" {
				t.Errorf("%v, content %.30q: s from %q", gen, content, win)
			}
		}
	}
	tr.write(t, filepath.Join(tr.managed, "opencode.jsonc"), remote("managed"))
	if win, _ := winner(t, dir, tr.env(opencode.V1, "OPENCODE_CONFIG_CONTENT", remote("content"))); win != "managed" {
		t.Errorf("1.x: s from %q, want the managed directory's", win)
	}
	if win, _ := winner(t, dir, tr.env(opencode.V2, "OPENCODE_CONFIG_CONTENT", remote("content"))); win != "content" {
		t.Errorf("2.x: s from %q, want the content (2.x has no managed directory)", win)
	}
	if got := opencode.ConfigLayers(dir, tr.env(opencode.V2, "OPENCODE_CONFIG_CONTENT", "SECRET")); slices.ContainsFunc(got, func(s string) bool {
		return strings.Contains(s, "SECRET")
	}) {
		t.Errorf("the inline config's text is in the sources: %v", got)
	}
}

// $OPENCODE_DISABLE_PROJECT_CONFIG drops the project's layers, not the
// others.
func TestConfigProjectDisabled(t *testing.T) {
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	tr.gitRepo(t, "p")
	tr.write(t, "p/opencode.json", `{"mcp":{"project":{"type":"local","command":["p"]}}}`)
	tr.write(t, "p/.opencode/opencode.json", `{"mcp":{"dot":{"type":"local","command":["d"]}}}`)
	tr.write(t, filepath.Join(tr.xdg, "opencode", "opencode.json"), `{"mcp":{"global":{"type":"local","command":["g"]}}}`)
	for _, c := range []struct {
		gen  opencode.Generation
		vars []string
	}{
		{opencode.V1, []string{"OPENCODE_DISABLE_PROJECT_CONFIG", "true"}},
		{opencode.V2, []string{"OPENCODE_DISABLE_PROJECT_CONFIG", "1"}},
		{opencode.V2, []string{"OPENCODE_CONFIG_PROJECT_DISABLE", "TRUE"}},
	} {
		cfg, _ := opencode.ReadMCPConfig(dir, tr.env(c.gen, c.vars...))
		if got := slices.Sorted(maps.Keys(cfg)); !slices.Equal(got, []string{"global"}) {
			t.Errorf("%v %v: servers %v", c.gen, c.vars, got)
		}
	}
}

// 1.x merges a server named again key by key (measured: a later
// {"enabled": false} disables the server an earlier file defines, and an
// earlier "enabled": false outlives a later definition without one); 2.x
// replaces it whole and drops a server without a type.
func TestConfigSameNameServer(t *testing.T) {
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	tr.gitRepo(t, "p")
	tr.write(t, filepath.Join(tr.xdg, "opencode", "opencode.json"), `{"mcp":{
		"m": {"type": "remote", "url": "http://127.0.0.1:9/global", "enabled": false},
		"p": {"type": "local", "command": ["node", "p.js"], "cwd": "sub"}}}`)
	tr.write(t, "p/opencode.json", `{"mcp":{
		"m": {"type": "remote", "url": "http://127.0.0.1:9/project"},
		"p": {"enabled": false}}}`)
	v1, _ := opencode.ReadMCPConfig(dir, tr.env(opencode.V1))
	if m := v1["m"]; m.URL != "http://127.0.0.1:9/project" || m.Enabled == nil || *m.Enabled {
		t.Errorf("1.x m = %+v, want the project's URL, still disabled", m)
	}
	if p := v1["p"]; p.Type != "local" || !slices.Equal(p.Command, []string{"node", "p.js"}) || p.Cwd != "sub" || p.Enabled == nil || *p.Enabled {
		t.Errorf("1.x p = %+v, want the global server, disabled", p)
	}
	v2, _ := opencode.ReadMCPConfig(dir, tr.env(opencode.V2))
	if m := v2["m"]; m.URL != "http://127.0.0.1:9/project" || m.Enabled != nil {
		t.Errorf("2.x m = %+v, want the project's whole", m)
	}
	if p := v2["p"]; p.Type != "local" || p.Enabled != nil {
		t.Errorf("2.x p = %+v, want the global one (the project's has no type)", p)
	}
	// Either line's: 1.x's entry where both name the server.
	either, _ := opencode.ReadMCPConfig(dir, tr.env(opencode.GenUnknown))
	if p := either["p"]; p.Enabled == nil || *p.Enabled {
		t.Errorf("either line's p = %+v, want 1.x's", p)
	}
}

// An OpenCode that does not see this machine's files (another mount
// namespace: a container) has no config here: not an empty one.
func TestConfigOfAnotherMountNamespaceIsUnknown(t *testing.T) {
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	tr.write(t, "p/opencode.json", remote("p"))
	env := tr.env(opencode.V1)
	env.Local = false
	if cfg, err := opencode.ReadMCPConfig(dir, env); !errors.Is(err, opencode.ErrConfigUnknown) || cfg != nil {
		t.Errorf("= %v, %v; want ErrConfigUnknown", cfg, err)
	}
	if _, err := opencode.ReadMCPConfig(dir, opencode.ConfigEnv{}); !errors.Is(err, opencode.ErrConfigUnknown) {
		t.Errorf("the zero ConfigEnv: %v, want ErrConfigUnknown", err)
	}
	env.Local = true
	if _, err := opencode.ReadMCPConfig("p", env); !errors.Is(err, opencode.ErrConfigUnknown) {
		t.Errorf("a relative directory: %v, want ErrConfigUnknown", err)
	}
}

// The same, through a real process in a mount namespace of its own.
func TestConfigOfARealProcessInAnotherMountNamespace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("mount namespaces are Linux's")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("no unshare:", err)
		}
		t.Fatal("no unshare under CI:", err)
	}
	args := []string{"-m", "sleep", "60"}
	if os.Geteuid() != 0 {
		args = append([]string{"-r"}, args...)
	}
	cmd := exec.Command(unshare, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitExec(t, cmd.Process.Pid, "sleep")
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	tr.write(t, "p/opencode.json", remote("p"))
	env := tr.env(opencode.V1)
	env.Local, _ = procview.SameMountNamespace(cmd.Process.Pid)
	if _, err := opencode.ReadMCPConfig(dir, env); !errors.Is(err, opencode.ErrConfigUnknown) {
		t.Errorf("an OpenCode in its own mount namespace: %v, want ErrConfigUnknown", err)
	}
}

// waitExec waits until process pid runs argv[0] name.
func waitExec(t *testing.T, pid int, name string) {
	t.Helper()
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p, err := tab.Read(pid); err == nil && len(p.Argv) > 0 && filepath.Base(p.Argv[0]) == name {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d does not run %s", pid, name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The variables are OpenCode's, read from its process: not the daemon's.
func TestConfigEnvironmentOfTheOpenCodeProcess(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no environment reader on", runtime.GOOS)
	}
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	theirs := filepath.Join(tr.root, "theirs")
	tr.write(t, filepath.Join(theirs, "opencode.json"), remote("theirs"))
	ours := filepath.Join(tr.root, "ours")
	tr.write(t, filepath.Join(ours, "opencode.json"), remote("ours"))
	t.Setenv("OPENCODE_CONFIG_DIR", ours)
	t.Setenv("HOME", tr.home)
	t.Setenv("XDG_CONFIG_HOME", tr.xdg)
	t.Setenv("OPENCODE_TEST_MANAGED_CONFIG_DIR", tr.managed)
	t.Setenv("OPENCODE_CONFIG_CONTENT", "")
	t.Setenv("OPENCODE_CONFIG", "")

	cmd := exec.Command("sleep", "60") // stands for OpenCode: only its environment matters
	cmd.Env = []string{"OPENCODE_CONFIG_DIR=" + theirs, "HOME=" + tr.home, "XDG_CONFIG_HOME=" + tr.xdg, "OPENCODE_TEST_MANAGED_CONFIG_DIR=" + tr.managed}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitExec(t, cmd.Process.Pid, "sleep")
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	for _, gen := range []opencode.Generation{opencode.V1, opencode.V2} {
		env := opencode.OwnConfigEnv(gen)
		if win, _ := winner(t, dir, env); win != "ours" {
			t.Fatalf("%v: this process's environment gives s from %q", gen, win)
		}
		env.Local, err = procview.SameMountNamespace(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		getenv, ok := procview.OpenCodeEnv(tab, cmd.Process.Pid)
		if !ok {
			t.Fatal("the process's environment cannot be read")
		}
		env.Getenv = getenv
		if win, read := winner(t, dir, env); win != "theirs" || slices.Contains(read, "ours") {
			t.Errorf("%v: with the process's environment s is from %q, layers %v", gen, win, read)
		}
	}
}

// Only the variables procview.OpenCodeEnv reads are asked: any other would
// silently be "" for an OpenCode process.
func TestConfigAsksOnlyTheVariablesReadOfOpenCode(t *testing.T) {
	tr := newTree(t)
	dir := tr.mkdir(t, "p")
	tr.gitRepo(t, "p")
	tr.write(t, "p/opencode.json", remote("p"))
	reader := &askedEnv{}
	procview.OpenCodeEnv(reader, 1)
	known := reader.asked
	for _, gen := range []opencode.Generation{opencode.V1, opencode.V2, opencode.GenUnknown} {
		env := tr.env(gen, "OPENCODE_CONFIG_CONTENT", "{}", "OPENCODE_CONFIG_DIR", tr.home)
		inner := env.Getenv
		env.Getenv = func(k string) string {
			if !slices.Contains(known, k) {
				t.Errorf("%v asked %s, which procview.OpenCodeEnv does not read", gen, k)
			}
			return inner(k)
		}
		if _, err := opencode.ReadMCPConfig(dir, env); err != nil {
			t.Fatal(err)
		}
	}
}

// askedEnv is a process table that reads environments, and notes the
// variables it is asked.
type askedEnv struct {
	procview.Table
	asked []string
}

func (a *askedEnv) Env(_ int, name string) (string, bool, error) {
	a.asked = append(a.asked, name)
	return "", false, nil
}

// The layers listed for one tree, lowest first.
func TestConfigSources(t *testing.T) {
	tr := newTree(t)
	tr.gitRepo(t, "r")
	dir := tr.mkdir(t, "r/a")
	r := filepath.Join(tr.root, "r")
	g := filepath.Join(tr.xdg, "opencode")
	env := func(gen opencode.Generation) opencode.ConfigEnv {
		return tr.env(gen, "OPENCODE_CONFIG", "/etc/oc.json", "OPENCODE_CONFIG_DIR", "/c", "OPENCODE_CONFIG_CONTENT", "{}")
	}
	want := []string{
		g + "/config.json", g + "/opencode.json", g + "/opencode.jsonc",
		"/etc/oc.json",
		r + "/opencode.json", r + "/opencode.jsonc", dir + "/opencode.json", dir + "/opencode.jsonc",
		dir + "/.opencode/opencode.json", dir + "/.opencode/opencode.jsonc", r + "/.opencode/opencode.json", r + "/.opencode/opencode.jsonc",
		tr.home + "/.opencode/opencode.json", tr.home + "/.opencode/opencode.jsonc",
		"/c/opencode.json", "/c/opencode.jsonc",
		"$OPENCODE_CONFIG_CONTENT",
		tr.managed + "/opencode.json", tr.managed + "/opencode.jsonc",
	}
	if got := opencode.ConfigLayers(dir, env(opencode.V1)); !slices.Equal(got, want) {
		t.Errorf("1.x:\n got %q\nwant %q", got, want)
	}
	var walk, dots []string
	for d := dir; ; d = filepath.Dir(d) {
		walk = append([]string{filepath.Join(d, "opencode.json"), filepath.Join(d, "opencode.jsonc")}, walk...)
		dots = append([]string{filepath.Join(d, ".opencode", "opencode.json"), filepath.Join(d, ".opencode", "opencode.jsonc")}, dots...)
		if d == filepath.Dir(d) {
			break
		}
	}
	want = append(append(append([]string{"/c/opencode.json", "/c/opencode.jsonc", "/etc/oc.json"}, walk...), dots...), "$OPENCODE_CONFIG_CONTENT")
	if got := opencode.ConfigLayers(dir, env(opencode.V2)); !slices.Equal(got, want) {
		t.Errorf("2.x:\n got %q\nwant %q", got, want)
	}
	// Without HOME the home is ConfigEnv.Home.
	e := opencode.ConfigEnv{Local: true, Home: "/home/me", Generation: opencode.V2}
	if got := opencode.ConfigLayers("/p", e); got[0] != "/home/me/.config/opencode/opencode.json" {
		t.Errorf("sources %v", got)
	}
}

// Two layers of any content: the project's servers win by each line's
// rule, 2.x keeps only typed servers, and nothing fails.
func FuzzReadMCPConfig(f *testing.F) {
	f.Add([]byte(`{"mcp":{"a":{"type":"local","command":["x"],"enabled":false}}}`), []byte(`{"mcp":{"a":{"enabled":true}}}`))
	f.Add([]byte(`{"mcp":{"servers":{"a":{"type":"remote","url":"http://x"}}}}`), []byte(`{"mcp":{"a":{"type":"local","command":["y"],"cwd":"d"}}}`))
	f.Add([]byte(`{"mcp":{"a":{"type":"remote","url":"http://x"}}}`), []byte("// c\n{\"mcp\":{\"servers\":{\"a\":{\"disabled\":true,},},}}"))
	f.Add([]byte(`null`), []byte(`{"mcp":{"servers":7,"b":[],"c":{"type":1,"command":"x","cwd":2}}}`))
	f.Fuzz(func(t *testing.T, global, project []byte) {
		tr := newTree(t)
		tr.gitRepo(t, "p")
		dir := filepath.Join(tr.root, "p")
		tr.write(t, filepath.Join(tr.xdg, "opencode", "opencode.json"), string(global))
		tr.write(t, "p/opencode.json", string(project))
		layer, _ := opencode.ParseConfigFile(project)
		v1, err1 := opencode.ReadMCPConfig(dir, tr.env(opencode.V1))
		v2, err2 := opencode.ReadMCPConfig(dir, tr.env(opencode.V2))
		either, err3 := opencode.ReadMCPConfig(dir, tr.env(opencode.GenUnknown))
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatal(err1, err2, err3)
		}
		for name, e := range v2 {
			if e.Type != "local" && e.Type != "remote" {
				t.Fatalf("2.x kept %s of type %q", name, e.Type)
			}
		}
		for name, p := range layer {
			if p.Type == "local" || p.Type == "remote" {
				if g := v2[name]; g.Type != p.Type || g.URL != p.URL || g.Cwd != p.Cwd || !slices.Equal(g.Command, p.Command) {
					t.Fatalf("2.x %s = %+v, want the project's %+v", name, g, p)
				}
			}
			if _, ok := v1[name]; !ok {
				t.Fatalf("1.x lost the project's %s", name)
			}
			if p.Type != "" && v1[name].Type != p.Type {
				t.Fatalf("1.x %s type %q, want the project's %q", name, v1[name].Type, p.Type)
			}
		}
		for name := range v1 {
			if _, ok := either[name]; !ok {
				t.Fatalf("either line's config lost 1.x's %s", name)
			}
		}
		for name := range v2 {
			if _, ok := either[name]; !ok {
				t.Fatalf("either line's config lost 2.x's %s", name)
			}
		}
	})
}
