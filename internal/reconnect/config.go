// config.go holds what GET /config says of a directory's servers: their
// kind (a remote server's connects take the remote share of the budget),
// a remote server's endpoint (probes, restart watches) and a local
// server's command (the process view). Directories mostly share one
// config (the user's global file), so a thousand of them hold one copy.

package reconnect

import (
	"encoding/binary"
	"slices"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// serverConfig is what the engine uses of one server's config entry.
type serverConfig struct {
	// kind is "local" or "remote"; "" for a server the config does not
	// list (added at run time), treated as local.
	kind    string
	url     string   // a remote server's endpoint, "" for none
	command []string // a local server's command line, nil for none
	cwd     string
}

// dirConfig maps server name → config. A dirConfig may be shared by many
// directories: it is never changed, only replaced.
type dirConfig map[string]serverConfig

// remote is name's endpoint when the config says it is a remote server
// with one, else "".
func (c dirConfig) remote(name string) string { return c[name].url }

// local reports whether the config gives name a local command.
func (c dirConfig) local(name string) bool { return c[name].command != nil }

// sameLocals reports whether a and b give the same servers the same
// local commands and working directories: the process view's list is
// the same under either.
func sameLocals(a, b dirConfig) bool {
	for _, c := range [2][2]dirConfig{{a, b}, {b, a}} {
		for n, sc := range c[0] {
			if sc.command == nil {
				continue
			}
			o := c[1][n]
			if o.cwd != sc.cwd || !slices.Equal(o.command, sc.command) {
				return false
			}
		}
	}
	return true
}

// newDirConfig builds a directory's config from GET /config's entries
// and the servers the last read showed that it does not list.
func newDirConfig(cfg map[string]opencode.MCPEntry, shown map[string]*server) dirConfig {
	c := make(dirConfig, len(cfg))
	for n, entry := range cfg {
		sc := serverConfig{kind: entry.Type}
		if entry.Type == "remote" {
			sc.url = entry.URL
		}
		if entry.Type == "local" && len(entry.Command) > 0 {
			sc.command, sc.cwd = entry.Command, entry.Cwd
		}
		c[n] = sc
	}
	for n := range shown {
		if _, listed := cfg[n]; !listed {
			c[n] = serverConfig{}
		}
	}
	return c
}

// maxConfigs bounds the engine's table of distinct directory configs;
// when full it starts over (the configs the directories hold stay theirs).
const maxConfigs = 256

// configs is the engine's table of distinct directory configs, by
// content, so directories configured alike share one. Guarded by
// Engine.mu.
type configs struct {
	byKey map[string]dirConfig
	key   []byte
}

// intern returns the table's copy of c.
func (t *configs) intern(c dirConfig) dirConfig {
	t.key = t.key[:0]
	for _, n := range opencode.Names(c) {
		sc := c[n]
		t.key = appendFields(t.key, n, sc.kind, sc.url, sc.cwd)
		t.key = binary.AppendUvarint(t.key, uint64(len(sc.command)))
		t.key = appendFields(t.key, sc.command...)
	}
	if have, ok := t.byKey[string(t.key)]; ok {
		return have
	}
	if t.byKey == nil || len(t.byKey) >= maxConfigs {
		t.byKey = map[string]dirConfig{}
	}
	t.byKey[string(t.key)] = c
	return c
}

// appendFields appends each of ss, length first, so no two configs share
// a key.
func appendFields(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = append(binary.AppendUvarint(b, uint64(len(s))), s...)
	}
	return b
}
