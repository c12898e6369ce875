package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"sync"
)

// ClientV2 talks to one OpenCode 2.x server (see
// ../shared/docs/opencode-v2-facts.md). It offers the request/response
// routes the engine uses with the same methods and types as the 1.x Client,
// so the engine cannot tell which generation it talks to. It shares the 1.x
// client's error type, timeouts, body limit, redirect policy and basic auth.
type ClientV2 struct {
	c *Client

	mu sync.Mutex
	// devConnect is true once the development route /api/mcp/{n}/connect
	// answered where /api/experimental/... did not exist.
	devConnect bool
}

// NewV2 returns a 2.x client for the server at rawURL. OpenCode 2.x always
// authenticates as user "opencode": leave Options.Username empty.
func NewV2(rawURL string, o Options) (*ClientV2, error) {
	c, err := New(rawURL, o)
	if err != nil {
		return nil, err
	}
	return &ClientV2{c: c}, nil
}

// URL is the server's base URL, safe to log.
func (v *ClientV2) URL() string { return v.c.URL() }

// The 2.x error tags the client tells apart ({"_tag": …} error bodies).
const (
	tagUnauthorized     = "UnauthorizedError"
	tagMCPNotFound      = "McpServerNotFoundError"
	tagLocationDenied   = "LocationPermissionDeniedError"
	locationParam       = "location[directory]"
	opMCPStatusV2       = "GET /api/mcp"
	opConfigV2          = "GET /api/config"
	opInfoV2            = "GET /api/info"
	opDocV2             = "GET /openapi.json"
	routeConnectExp     = "/api/experimental/mcp/{name}/connect"
	routeConnectDev     = "/api/mcp/{name}/connect"
	connectPrefixExp    = "/api/experimental/mcp/"
	connectPrefixDev    = "/api/mcp/"
	connectSuffix       = "/connect"
	maxErrorTagBodySize = 64 << 10
)

// locQuery selects dir's location. 2.x ignores ?directory= and would answer
// for its own working directory ($HOME for the shared service) instead.
func locQuery(dir string) url.Values { return url.Values{locationParam: {dir}} }

// errorTag returns the "_tag" of a 2.x error body, or "".
func errorTag(body []byte) string {
	if len(body) > maxErrorTagBodySize {
		return ""
	}
	var e struct {
		Tag string `json:"_tag"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Tag
}

// hintV2 is the fix for a password OpenCode 2 refused: it authenticates as
// "opencode" with OPENCODE_PASSWORD (or OPENCODE_SERVER_PASSWORD), or the
// background service's generated password.
const hintV2 = "OpenCode 2 takes the password from OPENCODE_PASSWORD, else OPENCODE_SERVER_PASSWORD, else its service.json: run mcp-reconnect without --url and --password to follow the background service, or set --password"

// classifyV2 sorts a 2.x answer into nil (2xx) or an *Error.
func (c *Client) classifyV2(op string, status int, body []byte) error {
	switch {
	case status >= 200 && status <= 299:
		return nil
	case status == http.StatusUnauthorized:
		return &Error{Op: op, URL: c.URL(), Status: status, kind: ErrUnauthorized, hint: hintV2}
	case status == http.StatusForbidden && errorTag(body) == tagLocationDenied:
		// 2.x's 403 is about the directory (OpenCode may not read it), not
		// the credentials: telling the user to fix the password would
		// send them the wrong way.
		return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
	case status == http.StatusForbidden:
		return &Error{Op: op, URL: c.URL(), Status: status, kind: ErrUnauthorized, hint: hintV2}
	case status == http.StatusNotFound:
		return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrNotFound}
	}
	return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
}

// get is a GET of a 2.x JSON route; it returns the 2xx body.
func (v *ClientV2) get(ctx context.Context, op, escPath string, query url.Values) ([]byte, error) {
	status, body, err := v.c.send(ctx, v.c.http, v.c.timeout, op, "GET", escPath, query, nil)
	if err != nil {
		return nil, err
	}
	if err := v.c.classifyV2(op, status, body); err != nil {
		return nil, err
	}
	return body, nil
}

// unexpected is the error for a 2xx answer that is not the expected JSON.
func (v *ClientV2) unexpected(op string, err error) error {
	return &Error{Op: op, URL: v.URL(), Status: http.StatusOK, Detail: err.Error(), kind: ErrUnavailable}
}

// MCPStatus reads GET /api/mcp for dir's location. Reading it boots the
// location and starts its MCP servers if it is not running: call it only
// for directories in use. A server still starting reads StatusPending; a
// status string this package does not know is kept as it is.
func (v *ClientV2) MCPStatus(ctx context.Context, dir string) (map[string]ServerStatus, error) {
	body, err := v.get(ctx, opMCPStatusV2, "/api/mcp", locQuery(dir))
	if err != nil {
		return nil, err
	}
	loc, st, err := ParseStatusV2(body)
	if err != nil {
		return nil, v.unexpected(opMCPStatusV2, err)
	}
	// A server that did not understand location[directory] answers for
	// its own working directory: those are not dir's servers, and acting
	// on them would connect servers in $HOME. Fail loudly instead.
	if loc != "" && path.Clean(loc) != path.Clean(dir) {
		return nil, v.unexpected(opMCPStatusV2, fmt.Errorf("answered for location %q, not %q: the server ignored location[directory]", loc, dir))
	}
	return st, nil
}

// ParseStatusV2 decodes the body of 2.x GET /api/mcp:
// {"location":{"directory":D,…},"data":[{"name":N,"status":{"status":S,"error"?:E}},…]}.
// It returns the location's directory ("" when the answer names none) and
// the servers. Anything but that shape is an error: an answer that cannot
// be understood must never read as "no servers".
func ParseStatusV2(body []byte) (location string, servers map[string]ServerStatus, err error) {
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
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return "", nil, fmt.Errorf("status is not {\"location\",\"data\":[…]}: %w", err)
	}
	if raw.Data == nil || *raw.Data == nil {
		return "", nil, errors.New("status has no \"data\" array")
	}
	if raw.Location != nil && len(raw.Location.Directory) > 0 {
		if json.Unmarshal(raw.Location.Directory, &location) != nil {
			return "", nil, errors.New("status location.directory is not a string")
		}
	}
	out := make(map[string]ServerStatus, len(*raw.Data))
	for i, item := range *raw.Data {
		if item == nil || item.Name == nil {
			return "", nil, fmt.Errorf("status entry %d has no string \"name\"", i)
		}
		if item.Status == nil || item.Status.Status == nil {
			return "", nil, fmt.Errorf("status of server %q has no string \"status.status\"", *item.Name)
		}
		st := ServerStatus{Status: *item.Status.Status}
		if e := item.Status.Error; len(e) > 0 && string(e) != "null" {
			if json.Unmarshal(e, &st.Error) != nil {
				st.Error = string(e) // not a string: keep it readable
			}
		}
		out[*item.Name] = st
	}
	return location, out, nil
}

// Connect asks OpenCode to (re)connect one MCP server in dir: 2.x stops and
// starts it whatever its status, and answers 204 when the attempt is over,
// whether or not the server came up: read MCPStatus for the outcome. An
// unknown name gives ErrNotFound.
//
// 2.0.21 is documented with POST /api/experimental/mcp/{name}/connect and
// development builds used /api/mcp/{name}/connect. A 405, or a 404 that is
// not OpenCode's own McpServerNotFoundError, means the route does not
// exist: the other one is tried, and the one that answered is tried first
// from then on.
func (v *ClientV2) Connect(ctx context.Context, dir, name string) error {
	if name == "." || name == ".." {
		// URL parsers (OpenCode's too) resolve these segments, escaped
		// or not: the request would reach another route.
		return &Error{Op: "POST " + routeConnectExp, URL: v.URL(), Detail: fmt.Sprintf("server name %q cannot be sent in a URL path", name), kind: ErrUnavailable}
	}
	v.mu.Lock()
	dev := v.devConnect
	v.mu.Unlock()
	var tried [2]string
	for i := range 2 {
		op, prefix := "POST "+routeConnectExp, connectPrefixExp
		if dev {
			op, prefix = "POST "+routeConnectDev, connectPrefixDev
		}
		tried[i] = op
		status, body, err := v.c.send(ctx, v.c.long, v.c.connectTimeout, op, "POST", prefix+url.PathEscape(name)+connectSuffix, locQuery(dir), nil)
		if err != nil {
			return err
		}
		tag := errorTag(body)
		if status == http.StatusMethodNotAllowed || status == http.StatusNotFound && tag == "" {
			dev = !dev
			continue
		}
		v.mu.Lock()
		v.devConnect = dev
		v.mu.Unlock()
		if status == http.StatusNotFound && tag != tagMCPNotFound {
			// The route exists but something else is missing (the
			// location's directory): not "no such server", which would
			// make the engine forget it.
			return &Error{Op: op, URL: v.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
		}
		return v.c.classifyV2(op, status, body)
	}
	return &Error{Op: tried[0], URL: v.URL(), Status: http.StatusNotFound,
		Detail: fmt.Sprintf("neither %s nor %s exists on this server: its OpenCode 2.x API is not the one this daemon knows", tried[0], tried[1]),
		kind:   ErrUnavailable}
}

// MCPConfig reads the MCP servers of GET /api/config for dir's location.
// Remote headers are never decoded (they may hold secrets).
func (v *ClientV2) MCPConfig(ctx context.Context, dir string) (map[string]MCPEntry, error) {
	body, err := v.get(ctx, opConfigV2, "/api/config", locQuery(dir))
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfigV2(body)
	if err != nil {
		return nil, v.unexpected(opConfigV2, err)
	}
	return cfg, nil
}

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
			out[name] = configEntryV2(raw)
		}
	}
	return out, nil
}

// configEntryV2 reads one server of a config layer, field by field so that
// one odd field costs only itself. Headers are not among the fields.
func configEntryV2(raw json.RawMessage) MCPEntry {
	var f struct {
		Type     json.RawMessage `json:"type"`
		URL      json.RawMessage `json:"url"`
		Disabled json.RawMessage `json:"disabled"`
	}
	var e MCPEntry
	if json.Unmarshal(raw, &f) != nil {
		return e
	}
	_ = json.Unmarshal(f.Type, &e.Type)
	_ = json.Unmarshal(f.URL, &e.URL)
	var disabled bool
	if json.Unmarshal(f.Disabled, &disabled) == nil {
		enabled := !disabled
		e.Enabled = &enabled
	}
	return e
}

// Info is the answer of 2.x GET /api/info.
type Info struct {
	// Version is OpenCode's version, e.g. "2.0.21".
	Version string
	// PID is the server's process id.
	PID int
	// URLs are the addresses the server listens on.
	URLs []string
}

// Info reads GET /api/info. It boots no location.
func (v *ClientV2) Info(ctx context.Context) (Info, error) {
	body, err := v.get(ctx, opInfoV2, "/api/info", nil)
	if err != nil {
		return Info{}, err
	}
	info, err := ParseInfo(body)
	if err != nil {
		return Info{}, v.unexpected(opInfoV2, err)
	}
	return info, nil
}

// ParseInfo decodes the body of GET /api/info. It requires a non-empty
// string version and an integer pid: only then is the answer OpenCode's.
func ParseInfo(body []byte) (Info, error) {
	var raw struct {
		Version *string         `json:"version"`
		PID     json.RawMessage `json:"pid"`
		URLs    []string        `json:"urls"`
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
	return Info{Version: *raw.Version, PID: int(pid), URLs: raw.URLs}, nil
}

// Doc reads GET /openapi.json, the server's OpenAPI description.
func (v *ClientV2) Doc(ctx context.Context) ([]byte, error) {
	return v.get(ctx, opDocV2, "/openapi.json", nil)
}
