package opencode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tailscale/hujson"
)

// An OpenCode 2 server without GET /api/config (the v2 preview build) does
// not say which of its MCP servers are remote, nor where they listen. When
// it runs on this machine its config files are this machine's: the daemon
// reads them as OpenCode does, to probe and restart-watch remote servers'
// endpoints as on 1.x.

// maxConfigFile bounds one config file read.
const maxConfigFile = 4 << 20

// ConfigFiles lists the files OpenCode reads the MCP servers of directory
// dir from, lowest priority first: the global config directory
// ($OPENCODE_CONFIG_DIR, else $XDG_CONFIG_HOME/opencode, else
// ~/.config/opencode), the file $OPENCODE_CONFIG, the directory's own
// opencode.json and opencode.jsonc, and those in its .opencode/. Missing
// files are listed too; getenv and home are the environment and home
// directory to resolve them with.
func ConfigFiles(dir string, getenv func(string) string, home string) []string {
	global := getenv("OPENCODE_CONFIG_DIR")
	if global == "" {
		if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
			global = filepath.Join(x, "opencode")
		} else if home != "" {
			global = filepath.Join(home, ".config", "opencode")
		}
	}
	var files []string
	pair := func(d string) {
		files = append(files, filepath.Join(d, "opencode.json"), filepath.Join(d, "opencode.jsonc"))
	}
	if global != "" {
		pair(global)
	}
	if f := getenv("OPENCODE_CONFIG"); f != "" {
		files = append(files, f)
	}
	pair(dir)
	pair(filepath.Join(dir, ".opencode"))
	return files
}

// LocalMCPConfig reads the MCP servers configured for dir from the files
// ConfigFiles lists, with this process's environment: a server named again
// in a later file replaces the earlier one whole. Files that are missing,
// unreadable or not JSONC count as empty.
func LocalMCPConfig(dir string) map[string]MCPEntry { return localMCPConfig(dir, nil) }

// OwnedMCPConfig is LocalMCPConfig reading only the files user uid (or
// root) owns and others cannot write: for decisions that end processes
// (doctor --reap), where another user's opencode.json (in /tmp, say) must
// not name what runs in that directory.
func OwnedMCPConfig(dir string, uid int) map[string]MCPEntry {
	return localMCPConfig(dir, func(fi os.FileInfo) bool {
		st, ok := fi.Sys().(*syscall.Stat_t)
		return ok && (int(st.Uid) == uid || st.Uid == 0) && fi.Mode().Perm()&0o022 == 0
	})
}

func localMCPConfig(dir string, trusted func(os.FileInfo) bool) map[string]MCPEntry {
	home, _ := os.UserHomeDir()
	out := map[string]MCPEntry{}
	for _, f := range ConfigFiles(dir, os.Getenv, home) {
		b, err := readConfigFile(f, trusted)
		if err != nil {
			continue
		}
		servers, err := ParseConfigFile(b)
		if err != nil {
			continue
		}
		for name, e := range servers {
			out[name] = e
		}
	}
	return out
}

// readConfigFile reads a regular file of at most 4 MiB. It is opened
// without blocking (a FIFO named opencode.json would block an open for
// ever, and with it the directory's check) and anything but a regular file
// is refused: a config file is data at rest.
func readConfigFile(name string, trusted func(os.FileInfo) bool) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	if trusted != nil && !trusted(fi) {
		return nil, fmt.Errorf("%s: owned by another user, or writable by others", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigFile {
		return nil, fmt.Errorf("%s: larger than 4 MiB", name)
	}
	return b, nil
}

// ParseConfigFile decodes the MCP servers of one OpenCode config file:
// JSON with comments and trailing commas (JSONC), in 2.x's shape
// {"mcp":{"servers":{NAME:{…}}}} or 1.x's {"mcp":{NAME:{…}}}. Each server
// is read field by field (type, url, command, cwd, disabled or 1.x's
// enabled); headers and environment are never decoded. A file that is not
// a JSONC object is an error; one without servers is an empty map.
func ParseConfigFile(b []byte) (map[string]MCPEntry, error) {
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
	out := map[string]MCPEntry{}
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
		out[name] = configEntryV2(raw)
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
