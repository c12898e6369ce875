package opencode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The pure parsers of the 2.x client: functions of the bytes of a 2.x
// answer (GET /api/mcp, /api/config, /api/info, /api/health, /api/status,
// /api/debug/location) to the package's types, and the reading of a
// failed server's error as a rate limit. They send nothing (the calls that
// use them are in v2.go).

// ParseStatusV2 decodes the body of 2.x GET /api/mcp:
// {"location":{"directory":D,…},"data":[{"name":N,"status":{"status":S,"error"?:E},"integrationID"?:I},…]}.
// It returns the location's directory ("" when the answer names none) and
// the servers. Anything but that shape is an error: an answer that cannot
// be understood must never read as "no servers". An integrationID that is
// not a string is ignored.
func ParseStatusV2(body []byte) (location string, servers map[string]MCPServerStatus, err error) {
	var raw struct {
		Location *struct {
			Directory json.RawMessage `json:"directory"`
		} `json:"location"`
		Data *[]*struct {
			Name   *string `json:"name"`
			Status *struct {
				Status *string         `json:"status"`
				Error  json.RawMessage `json:"error"`
			} `json:"status"`
			IntegrationID json.RawMessage `json:"integrationID"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return "", nil, fmt.Errorf("status is not {\"location\",\"data\":[…]}: %w", err)
	}
	if raw.Data == nil || *raw.Data == nil {
		return "", nil, errors.New("status has no \"data\" array")
	}
	if raw.Location != nil && len(raw.Location.Directory) > 0 && json.Unmarshal(raw.Location.Directory, &location) != nil {
		return "", nil, errors.New("status location.directory is not a string")
	}
	out := make(map[string]MCPServerStatus, len(*raw.Data))
	for i, item := range *raw.Data {
		if item == nil || item.Name == nil {
			return "", nil, fmt.Errorf("status entry %d has no string \"name\"", i)
		}
		if item.Status == nil || item.Status.Status == nil {
			return "", nil, fmt.Errorf("status of server %q has no string \"status.status\"", *item.Name)
		}
		st := MCPServerStatus{Status: *item.Status.Status}
		if e := item.Status.Error; len(e) > 0 && string(e) != "null" && json.Unmarshal(e, &st.Error) != nil {
			st.Error = string(e) // not a string: keep it readable
		}
		_ = json.Unmarshal(item.IntegrationID, &st.IntegrationID)
		st.RateLimited = st.Status == StatusFailed && rateLimited(st.Error)
		out[*item.Name] = st
	}
	return location, out, nil
}

// rateLimited reports whether a failed server's error says its endpoint
// answered 429. OpenCode 2 (packages/core/src/mcp/cooldown.ts and
// client.ts, read at 12d1b536) shares a cooldown per endpoint across all its
// connections once a remote MCP server answers 429, for the Retry-After
// the server sent (1 s without one), and answers every request within it
// with a 429 of its own, "MCP endpoint cooldown after HTTP 429", without
// asking the server. A client sees only the status entry: connect still
// answers 204, the entry is failed with the error "Error POSTing to
// endpoint: <the server's body> (HTTP 429)" or "Error POSTing to
// endpoint: MCP endpoint cooldown after HTTP 429", and no field, header
// or event carries the Retry-After. Builds before it (2.0.21, on the 1.x
// MCP SDK) name no status in that error.
//
// The body is the MCP server's own text, so only those exact forms count:
// the prefix, and the status OpenCode writes at the very end (or its
// cooldown's whole message). "HTTP 429" anywhere else, in a body that
// ends in another status or in a JSON-RPC error of the server, is the
// server's word, not a rate limit. (Only remote servers speak HTTP: the
// engine asks it of those alone.)
func rateLimited(errText string) bool {
	rest, ok := strings.CutPrefix(errText, rateLimitPrefix)
	return ok && (strings.HasSuffix(rest, rateLimitSuffix) || rest == rateLimitCooldown)
}

// The parts of OpenCode 2's errors for a remote endpoint's 429.
const (
	rateLimitPrefix   = "Error POSTing to endpoint: "
	rateLimitSuffix   = " (HTTP 429)"
	rateLimitCooldown = "MCP endpoint cooldown after HTTP 429"
)

// ParseConfigV2 decodes the body of 2.x GET /api/config: a bare array of
// config layers, lowest priority first. Only "document" layers carry
// settings; a server named again in a later layer replaces the earlier one
// whole. "disabled":true reads as Enabled=false. A top level that is not an
// array is an error; a layer or server of an unexpected shape is skipped
// or read as far as it makes sense, never fatal.
func ParseConfigV2(body []byte) (map[string]MCPEntry, error) {
	var layers []json.RawMessage
	if err := json.Unmarshal(body, &layers); err != nil {
		return nil, fmt.Errorf("config is not a JSON array of layers: %w", err)
	}
	if layers == nil {
		return nil, errors.New("config is null, not a JSON array of layers")
	}
	out := map[string]MCPEntry{}
	for _, l := range layers {
		var layer struct {
			Type string `json:"type"`
			Info struct {
				MCP struct {
					Servers map[string]json.RawMessage `json:"servers"`
				} `json:"mcp"`
			} `json:"info"`
		}
		if json.Unmarshal(l, &layer) != nil || layer.Type != "document" {
			continue
		}
		for name, raw := range layer.Info.MCP.Servers {
			out[name] = ParseConfigEntry(raw)
		}
	}
	return out, nil
}

// ParseConfigEntry reads one server of a config layer or file, field by field so that
// one odd field costs only itself: type, url, command, cwd, and 2.x's
// "disabled" or 1.x's "enabled". Headers and environment are not among the
// fields (they may hold secrets).
func ParseConfigEntry(raw json.RawMessage) MCPEntry {
	var f struct {
		Type     json.RawMessage `json:"type"`
		URL      json.RawMessage `json:"url"`
		Disabled json.RawMessage `json:"disabled"`
		Enabled  json.RawMessage `json:"enabled"`
		Command  json.RawMessage `json:"command"`
		Cwd      json.RawMessage `json:"cwd"`
	}
	var e MCPEntry
	if json.Unmarshal(raw, &f) != nil {
		return e
	}
	_ = json.Unmarshal(f.Type, &e.Type)
	_ = json.Unmarshal(f.URL, &e.URL)
	_ = json.Unmarshal(f.Cwd, &e.Cwd)
	var cmd []string
	if json.Unmarshal(f.Command, &cmd) == nil && len(cmd) > 0 {
		e.Command = cmd
	}
	var disabled, enabled bool
	switch {
	case json.Unmarshal(f.Disabled, &disabled) == nil:
		enabled = !disabled
		e.Enabled = &enabled
	case json.Unmarshal(f.Enabled, &enabled) == nil:
		e.Enabled = &enabled
	}
	return e
}

// Info is the answer of 2.x GET /api/info (or /api/health, /api/status).
type Info struct {
	// Version is OpenCode's version, e.g. "2.0.21".
	Version string
	// PID is the server's process id (0 when the route reports none).
	PID int
}

// ParseInfo decodes the body of GET /api/info. It requires a non-empty
// string version and an integer pid: only then is the answer OpenCode's.
func ParseInfo(body []byte) (Info, error) {
	var raw struct {
		Version *string         `json:"version"`
		PID     json.RawMessage `json:"pid"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Info{}, fmt.Errorf("info is not a JSON object: %w", err)
	}
	if raw.Version == nil || *raw.Version == "" {
		return Info{}, errors.New("info has no string \"version\"")
	}
	var pid int64
	if err := json.Unmarshal(raw.PID, &pid); err != nil || pid <= 0 || int64(int(pid)) != pid {
		return Info{}, errors.New("info has no integer \"pid\"")
	}
	return Info{Version: *raw.Version, PID: int(pid)}, nil
}

// ParseLocationsV2 decodes GET /api/debug/location: an array of
// {"directory":D,"workspaceID"?:W}. An entry without a string directory is
// skipped; anything but an array is an error.
func ParseLocationsV2(body []byte) ([]string, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("locations are not a JSON array: %w", err)
	}
	if raw == nil {
		return nil, errors.New("locations are null, not a JSON array")
	}
	dirs := make([]string, 0, len(raw))
	for _, item := range raw {
		var l struct {
			Directory json.RawMessage `json:"directory"`
		}
		var d string
		if json.Unmarshal(item, &l) == nil && json.Unmarshal(l.Directory, &d) == nil && d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}
