package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
)

// The MCP statuses OpenCode 1.18.34 reports, and 2.x's StatusPending.
const (
	StatusConnected               = "connected"
	StatusDisabled                = "disabled"
	StatusFailed                  = "failed"
	StatusNeedsAuth               = "needs_auth"
	StatusNeedsClientRegistration = "needs_client_registration"
	// StatusPending (2.x only): an attempt is running. Never connect it;
	// wait for its outcome.
	StatusPending = "pending"
)

// The statuses each generation reports: the one list the engine, doctor's
// checks of a server's API description and the fakes go by.
var (
	StatusesV1 = []string{StatusConnected, StatusDisabled, StatusFailed, StatusNeedsAuth, StatusNeedsClientRegistration}
	StatusesV2 = []string{StatusConnected, StatusPending, StatusDisabled, StatusFailed, StatusNeedsAuth, StatusNeedsClientRegistration}
)

// KnownStatus reports whether status is one the daemon knows what to do
// with (either generation's).
func KnownStatus(status string) bool { return slices.Contains(StatusesV2, status) }

// UserHint is what the user must do about a server in a status only they
// can fix (needs_auth, needs_client_registration), "" for the others.
// Shown by status, doctor and the daemon's events; name is shell-quoted.
func UserHint(status, name string) string {
	switch status {
	case StatusNeedsAuth:
		return "run: opencode mcp auth " + shellquote.Quote(name)
	case StatusNeedsClientRegistration:
		return "the server needs a registered OAuth client: add clientId to its config in opencode.json"
	}
	return ""
}

// MCPServerStatus is one MCP server's state as GET /mcp reports it.
type MCPServerStatus struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// IntegrationID (2.x) is set on remote servers only: OpenCode ties
	// each remote server to an integration.
	IntegrationID string `json:"integrationID,omitempty"`
	// RateLimited (2.x) is set on a failed server whose error says, in
	// OpenCode's own words, that its endpoint answered 429 Too Many
	// Requests (see ClientV2.MCPStatus): no failure of the server. How
	// long to wait is not said. Only a remote server's can be true: the
	// caller asks it of those alone.
	RateLimited bool `json:"-"`
}

func dirQuery(dir string) string { return "directory=" + url.QueryEscape(dir) }

// MCPStatus reads GET /mcp for dir. Reading it creates dir's instance and
// starts its MCP servers if they are not running: call it only for
// directories in use.
func (c *Client) MCPStatus(ctx context.Context, dir string) (map[string]MCPServerStatus, error) {
	raw, err := c.do(ctx, c.http, c.timeout, "GET /mcp", "GET", "/mcp", dirQuery(dir), nil)
	if err != nil {
		return nil, err
	}
	st, err := ParseStatus(raw)
	if err != nil {
		return nil, c.unexpected("GET /mcp", err)
	}
	return st, nil
}

// ParseStatus decodes the body of GET /mcp. Anything but a JSON object of
// objects with a string "status" is an error: an answer that cannot be
// understood must never read as "no servers".
//
// It is read at every check of every armed directory (a thousand
// directories: 35 reads a second at idle), so it builds nothing but the
// result: the text is checked whole (json.Valid), then walked (jscan);
// server names, statuses and error texts, which repeat from read to read,
// are shared (intern) rather than copied each time. Keys match as
// encoding/json matches a struct's fields (case folded); of a repeated
// key the last counts.
func ParseStatus(body []byte) (map[string]MCPServerStatus, error) {
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v) // for its words: where the text breaks
		return nil, fmt.Errorf("status is not a JSON object of server states: %w", err)
	}
	s := jscan{b: body}
	switch s.peek() {
	case '{':
	case 'n':
		return nil, fmt.Errorf("status is null, not a JSON object")
	default:
		return nil, fmt.Errorf("status is not a JSON object of server states: %s", snippet(body))
	}
	s.open()
	out := make(map[string]MCPServerStatus, 16)
	// missing are the servers whose last entry has no string status (a
	// repeated key counts by its last entry, as encoding/json counts it).
	var missing map[string]bool
	lacks := func(name string) {
		delete(out, name)
		if missing == nil {
			missing = map[string]bool{}
		}
		missing[name] = true
	}
	for first := true; ; {
		key, ok := s.member(&first)
		if !ok {
			break
		}
		name := internText(key)
		if s.peek() != '{' {
			if s.peek() == 'n' {
				s.skip()
				lacks(name)
				continue
			}
			return nil, fmt.Errorf("status is not a JSON object of server states: server %q is %s", name, snippet(s.skip()))
		}
		s.open()
		var st MCPServerStatus
		hasStatus := false
		for inner := true; ; {
			k, ok := s.member(&inner)
			if !ok {
				break
			}
			v := s.skip()
			switch {
			case bytes.EqualFold(k, []byte("status")):
				str, ok := internJSONString(v)
				if !ok {
					return nil, fmt.Errorf("status of server %q has no string \"status\"", name)
				}
				st.Status, hasStatus = str, true
			case bytes.EqualFold(k, []byte("error")):
				switch {
				case string(v) == "null":
					st.Error = ""
				case len(v) > 0 && v[0] == '"':
					st.Error, _ = internJSONString(v)
				default:
					st.Error = intern(v) // not a string: keep it readable
				}
			}
		}
		if s.bad {
			break
		}
		if !hasStatus {
			lacks(name)
			continue
		}
		out[name] = st
		delete(missing, name)
	}
	if s.bad {
		return nil, fmt.Errorf("status is not a JSON object of server states: %s", snippet(body))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("status of server %q has no string \"status\"", slices.Min(slices.Collect(maps.Keys(missing))))
	}
	return out, nil
}

// interned holds the strings status reads repeat: server names, statuses,
// error texts. Bounded in bytes: only short strings are kept, and when the
// map is full it starts over (strings handed out stay valid; they are only
// no longer shared), so error texts that change at every read cannot grow
// it, and what is read now is shared again.
var interned = struct {
	sync.Mutex
	m     map[string]string
	bytes int
}{m: map[string]string{}}

const (
	maxInterned      = 1 << 14 // strings
	maxInternedBytes = 1 << 20 // their bytes
	maxInternLen     = 256     // a longer string is copied, never kept
)

// intern returns b as a string, shared with every earlier read of it.
// For a []byte the lookup copies nothing: only a string not seen before
// is made.
func intern[T string | []byte](b T) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	interned.Lock()
	defer interned.Unlock()
	if s, ok := interned.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(interned.m) >= maxInterned || interned.bytes+len(s) > maxInternedBytes {
		clear(interned.m)
		interned.bytes = 0
	}
	interned.m[s] = s
	interned.bytes += len(s)
	return s
}

// internJSONString decodes the JSON string v (of a text json.Valid
// passed), shared as intern shares: one without escapes without a copy
// when it was seen before.
func internJSONString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return internText(v[1 : len(v)-1]), true
	}
	str, ok := jsonString(v)
	if !ok {
		return "", false
	}
	return intern(str), true
}

// internText is intern for JSON text without escapes (a key as jscan
// gives it, a string without them): a byte that is not UTF-8 becomes
// U+FFFD, as encoding/json makes it.
func internText(b []byte) string {
	if utf8.Valid(b) {
		return intern(b)
	}
	return intern(string([]rune(string(b)))) // RuneError for each bad byte
}

// Connect asks OpenCode to connect one MCP server in dir. OpenCode answers
// when its attempt is over, whether or not the server came up: read
// MCPStatus for the outcome. An unknown name gives ErrNotFound.
func (c *Client) Connect(ctx context.Context, dir, name string) error {
	_, err := c.do(ctx, c.long, DefaultConnectTimeout, "POST /mcp/{name}/connect", "POST", "/mcp/"+url.PathEscape(name)+"/connect", dirQuery(dir), nil)
	return err
}

// MCPEntry is what the daemon keeps of one configured MCP server. Remote
// headers are deliberately not decoded: they may hold secrets and the
// daemon never needs them.
type MCPEntry struct {
	// Type is "local" or "remote".
	Type string `json:"type"`
	// URL is a remote server's endpoint.
	URL string `json:"url,omitempty"`
	// Enabled is false when the config disables the server.
	Enabled *bool `json:"enabled,omitempty"`
	// Command is a local server's command line.
	Command []string `json:"command,omitempty"`
	// Cwd is a local server's working directory as configured (relative
	// to the location when not absolute).
	Cwd string `json:"cwd,omitempty"`
}

// MCPConfig reads the resolved MCP section of GET /config for dir.
func (c *Client) MCPConfig(ctx context.Context, dir string) (map[string]MCPEntry, error) {
	body, err := c.do(ctx, c.http, c.timeout, "GET /config", "GET", "/config", dirQuery(dir), nil)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		MCP map[string]MCPEntry `json:"mcp"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		return nil, c.unexpected("GET /config", fmt.Errorf("answer is not the expected JSON: %w", err))
	}
	if cfg.MCP == nil {
		cfg.MCP = map[string]MCPEntry{}
	}
	return cfg.MCP, nil
}

// Names returns the keys of a status map in order, for stable output.
func Names[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Doc reads GET /doc, the server's OpenAPI description.
func (c *Client) Doc(ctx context.Context) ([]byte, error) {
	return c.do(ctx, c.http, c.timeout, "GET /doc", "GET", "/doc", "", nil)
}

// Toast is a notice shown in an attached TUI.
type Toast struct {
	Title   string `json:"title,omitempty"`
	Message string `json:"message"`
	// Variant is info, success, warning or error.
	Variant string `json:"variant"`
	// Duration in milliseconds (0: OpenCode's default).
	Duration int `json:"duration,omitempty"`
}

// ShowToast shows t in the TUI attached to this server, if any. It names
// no directory on purpose: a directory would create that instance.
func (c *Client) ShowToast(ctx context.Context, t Toast) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, c.http, c.timeout, "POST /tui/show-toast", "POST", "/tui/show-toast", "", b)
	return err
}
