package opencode

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
	"github.com/tailscale/hujson"
)

// An OpenCode 2 server without GET /api/config (the v2 preview build) does
// not say which of its MCP servers are remote, nor where they listen, and
// doctor must know what runs in a directory whose OpenCode is gone. When
// OpenCode runs on this machine its config files are this machine's: they
// are read here as OpenCode reads them.
//
// # Where OpenCode looks, lowest priority first
//
// OpenCode 1.x (1.18.34). Read in the source bundled into the binary of
// the npm package opencode-linux-x64@1.18.34 (Config.loadInstanceState,
// ConfigPaths.projectFiles and .directories, FileSystem.up,
// Project.fromDirectory, ConfigManaged; upstream
// packages/opencode/src/config/config.ts and paths.ts):
// `strings $(scripts/install-opencode.sh) | grep -F Config.loadInstanceState`;
// measured with the real binary by test/e2e
// TestConfigFilesAsOpenCodeReadsThem (GET /config against ReadMCPConfig):
//
//  1. the global directory $XDG_CONFIG_HOME/opencode, else
//     ~/.config/opencode: config.json, opencode.json, opencode.jsonc;
//  2. $OPENCODE_CONFIG;
//  3. opencode.json, then opencode.jsonc, in each directory from the
//     worktree root down to the directory: the nearest wins;
//  4. the .opencode/ directories from the directory UP to the worktree
//     root (here the farthest wins), then ~/.opencode ($OPENCODE_TEST_HOME
//     for ~), then $OPENCODE_CONFIG_DIR: opencode.json, then
//     opencode.jsonc, in each; a directory named twice is read at its
//     first place;
//  5. $OPENCODE_CONFIG_CONTENT;
//  6. the managed directory /etc/opencode (/Library/Application
//     Support/opencode on macOS; $OPENCODE_TEST_MANAGED_CONFIG_DIR):
//     opencode.json, opencode.jsonc.
//
// The worktree root is what `git rev-parse --show-toplevel` answers in
// the nearest directory holding a .git (a directory, or a file in linked
// worktrees and submodules); outside a repository it is "/", and the
// walks of 3 and 4 go up to the file system root. Here the root is the
// nearest directory holding a .git, git is not run: a .git that git
// refuses (OpenCode then walks on) or a core.worktree elsewhere are not
// followed. $OPENCODE_DISABLE_PROJECT_CONFIG drops 3 and the walk of 4.
// A server named again merges into the earlier one key by key (remeda's
// mergeDeep; arrays such as command are replaced whole): a later
// {"enabled": false} disables a server an earlier file defines (measured).
// Older 1.x releases differ: upstream config.ts@002d9822 read
// $OPENCODE_CONFIG_CONTENT before the .opencode directories.
//
// OpenCode 2.x. Read in the v2 line's source: packages/core/src/config.ts
// (Config.discover) and global.ts, packages/cli/src/server-process.ts at
// 44b6938b (the v2 preview build, github.com/Althenia/opencode), and
// packages/core/src/config.ts@00402592 with config/discovery.ts@02f41ddf
// (github.com/anomalyco/opencode, later):
//
//  1. the global directory $OPENCODE_CONFIG_DIR, else
//     $XDG_CONFIG_HOME/opencode, else ~/.config/opencode: opencode.json,
//     opencode.jsonc;
//  2. $OPENCODE_CONFIG;
//  3. opencode.json, then opencode.jsonc, in each directory from the file
//     system root down to the directory: no stop at a repository;
//  4. the .opencode/ directories from the root down to the directory (the
//     nearest wins): opencode.json, opencode.jsonc;
//  5. $OPENCODE_CONFIG_CONTENT.
//
// 3 and 4 are dropped for $OPENCODE_CONFIG_PROJECT_DISABLE (or, when that
// is unset, $OPENCODE_DISABLE_PROJECT_CONFIG) and for the global directory
// itself; a file or directory that resolves to the global ones is read
// only as those. A server named again replaces the earlier one whole
// (packages/core/src/mcp/index.ts at 44b6938b; docs/opencode.md#config-layers-2x), and one
// without a type is dropped (the 1.x-shaped file's migration skips it, a
// 2.x-shaped file fails its schema).
//
// Neither line's remote layers are files, and none is read here: a
// logged-in organisation's .well-known/opencode, the account's config,
// macOS managed preferences. Nor are {env:NAME} and {file:PATH} in values
// substituted, and relative paths in the variables (resolved against
// OpenCode's working directory) are skipped.

// maxConfigFile bounds one config file read (and the inline config).
const maxConfigFile = 4 << 20

// ConfigEnv is what OpenCode finds its config files with: its
// environment, its home, whether it sees this machine's files, and its
// line. For an OpenCode process that is not this one, fill it from that
// process:
//
//	env := opencode.OwnConfigEnv(gen) // the fallback: this process's
//	env.Local, _ = procview.SameMountNamespace(pid)
//	if getenv, ok := procview.OpenCodeEnv(table, pid); ok {
//		env.Getenv = getenv
//	}
type ConfigEnv struct {
	// Local reports that OpenCode sees this machine's files: it runs in
	// this process's mount namespace. When false, nothing is read and
	// ReadMCPConfig answers ErrConfigUnknown: an OpenCode in a container
	// reads the container's files, and this machine's would invent its
	// config. The zero value is false.
	Local bool
	// Getenv answers a variable of OpenCode's environment, "" when it is
	// unset; only those procview.OpenCodeEnv reads are asked. Nil
	// is an environment without them.
	Getenv func(string) string
	// Home is OpenCode's home directory when its HOME is unset (Node's
	// os.homedir falls back to the user's passwd entry).
	Home string
	// Generation picks the line's rules: V1, V2, or GenUnknown for the
	// servers either line would configure (1.x's entry where both name
	// a server), for callers that cannot tell (doctor, after OpenCode
	// is gone).
	Generation Generation
}

// OwnConfigEnv is a ConfigEnv with this process's environment and home,
// for an OpenCode that shares them and this machine's files (one this
// process started), and the fallback for one whose environment cannot
// be read.
func OwnConfigEnv(gen Generation) ConfigEnv {
	home, _ := os.UserHomeDir()
	return ConfigEnv{Local: true, Getenv: os.Getenv, Home: home, Generation: gen}
}

// ErrConfigUnknown is ReadMCPConfig's answer when OpenCode's config files
// cannot be told: OpenCode does not see this machine's files (or that
// cannot be known), or the directory is not absolute. Report "config
// unknown", never an empty config.
var ErrConfigUnknown = errors.New("opencode config files unknown")

// configSource is one layer of OpenCode's config: a file, or the inline
// $OPENCODE_CONFIG_CONTENT, whose text is never held here (it may hold
// header secrets).
type configSource struct {
	// Path is the file; "" for the inline config.
	Path string
	// Inline marks the place of $OPENCODE_CONFIG_CONTENT.
	Inline bool
}

// getenv is env's variable name ("" without a Getenv).
func (env ConfigEnv) getenv(name string) string {
	if env.Getenv == nil {
		return ""
	}
	return env.Getenv(name)
}

// home is OpenCode's os.homedir().
func (env ConfigEnv) home() string { return cmp.Or(env.getenv("HOME"), env.Home) }

// absVar is the variable name when it is an absolute path: a relative one
// is OpenCode's working directory's, unknown here.
func (env ConfigEnv) absVar(name string) string {
	if v := env.getenv(name); filepath.IsAbs(v) {
		return filepath.Clean(v)
	}
	return ""
}

// xdgConfigDir is OpenCode's $XDG_CONFIG_HOME/opencode, else
// ~/.config/opencode (the xdg-basedir package); "" when unknown.
func (env ConfigEnv) xdgConfigDir() string {
	if x := env.getenv("XDG_CONFIG_HOME"); x != "" {
		if !filepath.IsAbs(x) {
			return ""
		}
		return filepath.Join(x, "opencode")
	}
	if h := env.home(); filepath.IsAbs(h) {
		return filepath.Join(h, ".config", "opencode")
	}
	return ""
}

// truthy is OpenCode's flag test: "1" or "true" in any case.
func truthy(v string) bool { return v == "1" || strings.EqualFold(v, "true") }

// up lists dir and its ancestors, nearest first, up to and including
// stop ("" or a non-ancestor: the file system root).
func up(dir, stop string) []string {
	var out []string
	for d := dir; ; {
		out = append(out, d)
		parent := filepath.Dir(d)
		if d == stop || parent == d {
			return out
		}
		d = parent
	}
}

// worktreeV1 is where OpenCode 1.x stops its walks up from dir: the
// nearest directory holding a .git of any kind (a file in linked
// worktrees and submodules), or "" (the file system root) outside a
// repository.
func worktreeV1(dir string) string {
	for _, d := range up(dir, "") {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
	}
	return ""
}

// managedDirV1 is OpenCode 1.x's managed config directory.
func (env ConfigEnv) managedDirV1() string {
	if env.getenv("OPENCODE_TEST_MANAGED_CONFIG_DIR") != "" {
		return env.absVar("OPENCODE_TEST_MANAGED_CONFIG_DIR")
	}
	switch runtime.GOOS {
	case "darwin":
		return "/Library/Application Support/opencode"
	case "windows":
		return ""
	}
	return "/etc/opencode"
}

// sourcesV1 lists OpenCode 1.x's layers for dir (absolute, clean).
func sourcesV1(dir string, env ConfigEnv) []configSource {
	var out []configSource
	files := func(d string, names ...string) {
		for _, n := range names {
			out = append(out, configSource{Path: filepath.Join(d, n)})
		}
	}
	global := env.xdgConfigDir()
	if global != "" {
		files(global, "config.json", "opencode.json", "opencode.jsonc")
	}
	if f := env.absVar("OPENCODE_CONFIG"); f != "" {
		out = append(out, configSource{Path: f})
	}
	project := !truthy(env.getenv("OPENCODE_DISABLE_PROJECT_CONFIG"))
	walk := up(dir, worktreeV1(dir))
	if project {
		for i := len(walk) - 1; i >= 0; i-- {
			files(walk[i], "opencode.json", "opencode.jsonc")
		}
	}
	// The config directories, each once at its first place; the global
	// one heads the list (its files were read above) and is read again
	// only when it is also $OPENCODE_CONFIG_DIR.
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	add(global)
	if project {
		for _, d := range walk {
			add(filepath.Join(d, ".opencode"))
		}
	}
	home := cmp.Or(env.getenv("OPENCODE_TEST_HOME"), env.home())
	if filepath.IsAbs(home) {
		add(filepath.Join(filepath.Clean(home), ".opencode"))
	}
	configDir := env.absVar("OPENCODE_CONFIG_DIR")
	add(configDir)
	for _, d := range dirs {
		if strings.HasSuffix(d, ".opencode") || d == configDir {
			files(d, "opencode.json", "opencode.jsonc")
		}
	}
	if env.getenv("OPENCODE_CONFIG_CONTENT") != "" {
		out = append(out, configSource{Inline: true})
	}
	if m := env.managedDirV1(); m != "" {
		files(m, "opencode.json", "opencode.jsonc")
	}
	return out
}

// resolved is path with its symbolic links followed, as far as they
// exist (OpenCode 2 compares config paths resolved).
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(r, filepath.Base(path))
	}
	return path
}

// sourcesV2 lists OpenCode 2.x's layers for dir (absolute, clean).
func sourcesV2(dir string, env ConfigEnv) []configSource {
	var out []configSource
	file := func(p string) { out = append(out, configSource{Path: p}) }
	global := env.xdgConfigDir()
	if env.getenv("OPENCODE_CONFIG_DIR") != "" {
		global = env.absVar("OPENCODE_CONFIG_DIR")
	}
	isGlobal := map[string]bool{}
	if global != "" {
		for _, p := range []string{global, filepath.Join(global, "opencode.json"), filepath.Join(global, "opencode.jsonc")} {
			isGlobal[resolved(p)] = true
		}
		file(filepath.Join(global, "opencode.json"))
		file(filepath.Join(global, "opencode.jsonc"))
	}
	if f := env.absVar("OPENCODE_CONFIG"); f != "" {
		file(f)
	}
	disable := cmp.Or(env.getenv("OPENCODE_CONFIG_PROJECT_DISABLE"), env.getenv("OPENCODE_DISABLE_PROJECT_CONFIG"))
	if !truthy(disable) && (global == "" || resolved(dir) != resolved(global)) {
		walk := up(dir, "")
		for i := len(walk) - 1; i >= 0; i-- {
			for _, n := range []string{"opencode.json", "opencode.jsonc"} {
				if p := filepath.Join(walk[i], n); !isGlobal[resolved(p)] {
					file(p)
				}
			}
		}
		for i := len(walk) - 1; i >= 0; i-- {
			if d := filepath.Join(walk[i], ".opencode"); !isGlobal[resolved(d)] {
				file(filepath.Join(d, "opencode.json"))
				file(filepath.Join(d, "opencode.jsonc"))
			}
		}
	}
	if env.getenv("OPENCODE_CONFIG_CONTENT") != "" {
		out = append(out, configSource{Inline: true})
	}
	return out
}

// ReadMCPConfig reads the MCP servers OpenCode configures for directory
// dir, from the layers its line reads (sourcesV1, sourcesV2; both with
// GenUnknown), merged by that line's rules.
// Files that are missing, unreadable, not regular or not JSONC count as
// empty. ErrConfigUnknown when env is not Local or dir is not absolute.
func ReadMCPConfig(dir string, env ConfigEnv) (map[string]MCPEntry, error) {
	return readMCPConfig(dir, env, private.Trust{Anyone: true})
}

// OwnedMCPConfig is ReadMCPConfig for an OpenCode of either line that
// shares this process's environment and files, reading only the files
// user uid (or root) owns and others cannot write, and an empty map for
// ErrConfigUnknown: for decisions that end processes (doctor --reap),
// where another user's opencode.json (in /tmp, say, which the walk up
// from a directory under /tmp reaches) must not name what runs in that
// directory.
func OwnedMCPConfig(dir string, uid int) map[string]MCPEntry {
	cfg, _ := readMCPConfig(dir, OwnConfigEnv(GenUnknown), private.Trust{UID: uid, RootMayOwn: true, Readable: true})
	if cfg == nil {
		cfg = map[string]MCPEntry{}
	}
	return cfg
}

func readMCPConfig(dir string, env ConfigEnv, trust private.Trust) (map[string]MCPEntry, error) {
	if !env.Local {
		return nil, fmt.Errorf("%w: OpenCode does not see this machine's files (another mount namespace, or one that cannot be compared)", ErrConfigUnknown)
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w: directory %q is not absolute", ErrConfigUnknown, dir)
	}
	dir = filepath.Clean(dir)
	// One read per layer, even where both lines' rules are applied.
	layers := map[configSource]map[string]configServer{}
	read := func(s configSource) map[string]configServer {
		if l, ok := layers[s]; ok {
			return l
		}
		var b []byte
		if !s.Inline {
			b, _ = readConfigFile(s.Path, trust)
		} else if c := env.getenv("OPENCODE_CONFIG_CONTENT"); len(c) <= maxConfigFile {
			b = []byte(c)
		}
		l, _ := parseConfigServers(b) // nil for an empty or missing file
		layers[s] = l
		return l
	}
	v1 := func() map[string]MCPEntry {
		out := map[string]MCPEntry{}
		for _, s := range sourcesV1(dir, env) {
			for name, srv := range read(s) {
				out[name] = srv.mergeInto(out[name])
			}
		}
		return out
	}
	v2 := func() map[string]MCPEntry {
		out := map[string]MCPEntry{}
		for _, s := range sourcesV2(dir, env) {
			for name, srv := range read(s) {
				if srv.Type == "local" || srv.Type == "remote" {
					out[name] = srv.MCPEntry
				}
			}
		}
		return out
	}
	switch env.Generation {
	case V1:
		return v1(), nil
	case V2:
		return v2(), nil
	}
	out := v2()
	maps.Copy(out, v1())
	return out, nil
}

// readConfigFile reads a regular file of at most 4 MiB that trust
// trusts. It is opened without blocking (a FIFO named opencode.json would
// block an open for ever, and with it the directory's check): a config
// file is data at rest.
func readConfigFile(name string, trust private.Trust) ([]byte, error) {
	f, _, err := trust.Open("config file", name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigFile {
		return nil, fmt.Errorf("%s: larger than 4 MiB", name)
	}
	return b, nil
}

// configServer is one server as one layer names it: the entry, and which
// of its fields the layer sets (1.x merges only those into an earlier
// entry of the name).
type configServer struct {
	MCPEntry
	set configFields
}

// configFields are the MCPEntry fields a layer sets.
type configFields uint8

const (
	setType configFields = 1 << iota
	setURL
	setCommand
	setCwd
	setEnabled
)

// mergeInto is 1.x's merge of the server into the entry an earlier layer
// gave its name: each field the layer sets replaces the earlier one.
func (s configServer) mergeInto(e MCPEntry) MCPEntry {
	if s.set&setType != 0 {
		e.Type = s.Type
	}
	if s.set&setURL != 0 {
		e.URL = s.URL
	}
	if s.set&setCommand != 0 {
		e.Command = s.Command
	}
	if s.set&setCwd != 0 {
		e.Cwd = s.Cwd
	}
	if s.set&setEnabled != 0 {
		e.Enabled = s.Enabled
	}
	return e
}

// parseConfigServers decodes the MCP servers of one OpenCode config file,
// with the fields each server sets: JSON with comments and trailing
// commas (JSONC), in 2.x's shape {"mcp":{"servers":{NAME:{…}}}} or 1.x's
// {"mcp":{NAME:{…}}}. Each server is read field by field (type, url,
// command, cwd, disabled or 1.x's enabled); headers and environment are
// never decoded. A file that is not a JSONC object is an error; one
// without servers is an empty map.
func parseConfigServers(b []byte) (map[string]configServer, error) {
	std, err := hujson.Standardize(b)
	if err != nil {
		return nil, fmt.Errorf("config is not JSONC: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(std, &top); err != nil {
		return nil, fmt.Errorf("config is not a JSON object: %w", err)
	}
	if top == nil {
		return nil, errors.New("config is null, not a JSON object")
	}
	out := map[string]configServer{}
	var mcp map[string]json.RawMessage
	if json.Unmarshal(top["mcp"], &mcp) != nil {
		return out, nil
	}
	// 2.x nests the servers under "servers"; in 1.x every key of "mcp" is
	// a server. A 1.x server named "servers" is an object with a "type"
	// string, 2.x's "servers" an object of objects.
	if raw, ok := mcp["servers"]; ok && !isServer(raw) {
		var servers map[string]json.RawMessage
		if json.Unmarshal(raw, &servers) == nil {
			mcp = servers
		}
	}
	for name, raw := range mcp {
		if len(raw) == 0 || raw[0] != '{' {
			continue
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(raw, &keys)
		s := configServer{MCPEntry: configEntryV2(raw)}
		for key, bit := range map[string]configFields{"type": setType, "url": setURL, "command": setCommand, "cwd": setCwd, "enabled": setEnabled, "disabled": setEnabled} {
			if _, ok := keys[key]; ok {
				s.set |= bit
			}
		}
		out[name] = s
	}
	return out, nil
}

// isServer reports whether raw is one server's config: an object with a
// string "type".
func isServer(raw json.RawMessage) bool {
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	var t string
	return json.Unmarshal(raw, &s) == nil && json.Unmarshal(s.Type, &t) == nil
}
