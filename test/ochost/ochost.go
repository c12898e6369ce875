// Package ochost runs a hermetic OpenCode server for the end-to-end tests
// and the demo, of either generation: 1.x (`opencode serve`) or 2.x
// (`opencode serve`, or the background service every 2.x CLI command
// starts, `opencode serve --service`). Hermetic: its own temporary HOME
// and XDG directories (the user's OpenCode config is never read or
// written), no call beyond the loopback, a password, and its own loopback
// port. It speaks the few routes a test needs in each generation's words
// (readiness, MCP status, disposal, the project config file), so that a
// test states what it expects once. It also finds the binaries that
// scripts/install-opencode.sh installs.
package ochost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// The OpenCode releases the project is built and tested against, one per
// generation (scripts/install-opencode.sh and the Makefile pin the same).
const (
	// Version is the 1.x release, the demo's.
	Version = "1.18.34"
	// Version2 is the 2.x release.
	Version2 = "2.1.2"
)

// Generation is an OpenCode API generation.
type Generation int

const (
	// Gen1 is OpenCode 1.x: ready when GET /global/health answers; GET
	// /mcp?directory=D is a map of server name to status; POST
	// /instance/dispose; the password in OPENCODE_SERVER_PASSWORD; a
	// project's servers in opencode.json under "mcp".
	Gen1 Generation = 1
	// Gen2 is OpenCode 2.x: ready when GET /api/info answers; GET
	// /api/mcp?location[directory]=D is {location, data: [{name,
	// status}]}; DELETE /api/debug/location; the password in
	// OPENCODE_PASSWORD; a project's servers in opencode.jsonc under
	// "mcp" → "servers" (it ignores servers directly under "mcp").
	Gen2 Generation = 2
)

func (g Generation) String() string { return strconv.Itoa(int(g)) + ".x" }

// Binary returns the pinned 1.x binary: $OPENCODE_BIN, else the one
// scripts/install-opencode.sh puts under root/.cache.
func Binary(root string) string {
	if b := os.Getenv("OPENCODE_BIN"); b != "" {
		return b
	}
	return filepath.Join(root, ".cache", "opencode", "node_modules", "opencode-linux-x64", "bin", "opencode")
}

// Binary2 returns the pinned 2.x binary: $OPENCODE2_BIN, else the one
// `scripts/install-opencode.sh 2.1.2` puts under root/.cache.
func Binary2(root string) string {
	if b := os.Getenv("OPENCODE2_BIN"); b != "" {
		return b
	}
	return filepath.Join(root, ".cache", "opencode-"+Version2, "node_modules", "@opencode", "cli-linux-x64", "bin", "opencode")
}

// GenerationOf asks bin for its version (`--version`: 1.x prints
// "1.18.34", 2.x "opencode v2.1.2") and returns its generation. The
// answer is kept for the life of the process: a loaded machine takes
// seconds to start 1.x only to print its version.
func GenerationOf(bin string) (Generation, string, error) {
	if v, ok := versions.Load(bin); ok {
		return parseVersion(v.(string))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return 0, "", fmt.Errorf("%s --version: %w", bin, err)
	}
	g, v, err := parseVersion(string(out))
	if err == nil {
		versions.Store(bin, string(out))
	}
	return g, v, err
}

// versions caches GenerationOf: binary path → what --version printed.
var versions sync.Map

func parseVersion(out string) (Generation, string, error) {
	v := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(out), "opencode "), "v")
	major, _, _ := strings.Cut(v, ".")
	switch n, err := strconv.Atoi(major); {
	case err != nil || n < 1:
		return 0, "", fmt.Errorf("opencode --version printed %q, not a version", out)
	case n == 1:
		return Gen1, v, nil
	default:
		return Gen2, v, nil
	}
}

// Buffer is a concurrency-safe output buffer.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Options configure Start.
type Options struct {
	// Binary is the opencode executable.
	Binary string
	// Generation is Binary's; 0 asks the binary (GenerationOf).
	Generation Generation
	// Service (2.x only) starts the background service, `serve
	// --service`, instead of a plain server: it writes
	// $XDG_STATE_HOME/opencode/service.json ({id, version, url, pid,
	// password}; ServiceFile) and removes it when it stops. It ignores
	// OPENCODE_PASSWORD and keeps its password in its own config
	// ($XDG_CONFIG_HOME/opencode/service.json), which Start writes first.
	Service bool
	// Port to listen on; 0 picks a free one. A service without a port
	// would take the shared 49374.
	Port int
	// Home is the hermetic home; "" makes a new temporary one (removed by Kill).
	Home string
	// Password for the server; "" generates one.
	Password string
	// Env adds variables (e.g. OPENCODE_CONFIG_CONTENT).
	Env []string
}

// OpenCode is a running hermetic OpenCode server, or one a test names by
// URL and password (its methods but Kill and PID work on such a value).
type OpenCode struct {
	URL      string
	Port     int
	Password string
	Home     string
	// Gen is the server's generation; 0 is 1.x.
	Gen Generation
	// Service: it is the 2.x background service (Options.Service).
	Service bool
	// Output is what the server printed.
	Output  *Buffer
	cmd     *exec.Cmd
	ownHome bool
	done    chan struct{}
}

// Env is an environment that never touches the user's OpenCode config and
// makes no call beyond the loopback (measured on 1.18.34 and 2.1.2: with
// these variables neither resolves a name; without them both do). 2.1.2
// still knocks on a few loopback ports of local model servers (1234,
// 11434, 8000), none of which a test uses.
func Env(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_STATE_HOME=" + filepath.Join(home, "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
	}
}

// SeedConfigDir stops OpenCode 1.x's hidden `npm install
// @opencode-ai/plugin` in dir: it is skipped when node_modules/ and a lock
// that lists the dependency exist. 2.1.2 installs nothing at start (it
// runs no npm and creates no node_modules), so a 2.x home needs no seed.
func SeedConfigDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o700); err != nil {
		return err
	}
	lock := fmt.Sprintf(`{"name":"opencode","lockfileVersion":3,"requires":true,"packages":{"":{"dependencies":{"@opencode-ai/plugin":%q}}}}`, Version)
	return os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(lock), 0o600)
}

// Start starts OpenCode and waits until it is ready (WaitReady).
func Start(o Options) (*OpenCode, error) {
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("opencode binary: %w (run scripts/install-opencode.sh)", err)
	}
	oc := &OpenCode{Port: o.Port, Home: o.Home, Password: o.Password, Gen: o.Generation, Service: o.Service, Output: &Buffer{}, done: make(chan struct{})}
	if oc.Gen == 0 {
		g, _, err := GenerationOf(o.Binary)
		if err != nil {
			return nil, err
		}
		oc.Gen = g
	}
	if oc.Service && oc.Gen != Gen2 {
		return nil, fmt.Errorf("OpenCode %s has no background service", oc.Gen)
	}
	if oc.Port == 0 {
		p, err := loopback.FreePort()
		if err != nil {
			return nil, err
		}
		oc.Port = p
	}
	if oc.Home == "" {
		h, err := os.MkdirTemp("", "mcpr-opencode-")
		if err != nil {
			return nil, err
		}
		oc.Home, oc.ownHome = h, true
		if oc.Gen == Gen1 {
			if err := SeedConfigDir(filepath.Join(h, "config", "opencode")); err != nil {
				return nil, err
			}
		}
	}
	if oc.Password == "" {
		oc.Password = fmt.Sprintf("pw-%d-%d", oc.Port, time.Now().UnixNano())
	}
	oc.URL = fmt.Sprintf("http://127.0.0.1:%d", oc.Port)
	args := []string{"serve", "--port", strconv.Itoa(oc.Port), "--hostname", "127.0.0.1"}
	env := append(Env(oc.Home), o.Env...)
	switch {
	case oc.Service:
		args = slices.Insert(args, 1, "--service")
		if err := writeJSON(filepath.Join(oc.Home, "config", "opencode", "service.json"), map[string]string{"password": oc.Password}); err != nil {
			return nil, err
		}
	case oc.Gen == Gen2:
		env = append(env, "OPENCODE_PASSWORD="+oc.Password)
	default:
		env = append(env, "OPENCODE_SERVER_PASSWORD="+oc.Password)
	}
	oc.cmd = exec.Command(o.Binary, args...)
	oc.cmd.Env = env
	oc.cmd.Dir = oc.Home
	oc.cmd.Stdout, oc.cmd.Stderr = oc.Output, oc.Output
	// Its own process group: 1.x's MCP servers are in it, and Kill ends
	// them with it (2.x puts each in a group of its own; Kill ends those
	// too).
	oc.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := oc.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = oc.cmd.Wait()
		close(oc.done)
	}()
	if err := oc.WaitReady(60 * time.Second); err != nil {
		oc.Kill()
		return nil, err
	}
	return oc, nil
}

// writeJSON writes v to path (0600), making its directory (0700).
func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// WaitReady polls the generation's readiness route (1.x GET
// /global/health; 2.x GET /api/info, which answers 503 while the server
// starts) with short timeouts: a request in the first half second after
// the port opens can hang.
func (o *OpenCode) WaitReady(timeout time.Duration) error {
	route := "/global/health"
	if o.Gen == Gen2 {
		route = "/api/info"
	}
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		code, _, err := o.Do(ctx, "GET", route, "")
		cancel()
		if err == nil && code == 200 {
			return nil
		}
		select {
		case <-o.done:
			return fmt.Errorf("opencode exited before it was ready; output:\n%s", o.Output)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("opencode on port %d not ready after %v (GET %s: %d %v); output:\n%s", o.Port, timeout, route, code, err, o.Output)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PID is the server's process id.
func (o *OpenCode) PID() int { return o.cmd.Process.Pid }

// ServiceFile is where a 2.x background service (Options.Service)
// announces itself: {id, version, url, pid, password}.
func (o *OpenCode) ServiceFile() string {
	return filepath.Join(o.Home, "state", "opencode", "service.json")
}

// Kill ends OpenCode and its MCP servers, and removes a home it made. A
// 1.x server's MCP servers are in its process group; 2.x starts each in a
// group of its own, so the groups its children lead are ended too.
func (o *OpenCode) Kill() {
	if o.cmd == nil || o.cmd.Process == nil {
		return
	}
	var groups []int
	if tab, err := procview.System(); err == nil {
		kids, _ := tab.Children(o.cmd.Process.Pid)
		for _, k := range kids {
			if p, err := tab.Stat(k); err == nil && p.PGID == k {
				groups = append(groups, k)
			}
		}
	}
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
	<-o.done
	if o.ownHome {
		_ = os.RemoveAll(o.Home)
	}
}

// Do sends one authenticated request; dir, when set, is the directory
// query in the generation's words (1.x ?directory=D, 2.x
// ?location[directory]=D), joined to any query path has.
func (o *OpenCode) Do(ctx context.Context, method, path, dir string) (int, []byte, error) {
	u := o.URL + path
	if dir != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		key := "directory"
		if o.Gen == Gen2 {
			key = "location[directory]"
		}
		u += sep + url.QueryEscape(key) + "=" + url.QueryEscape(dir)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth("opencode", o.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// MCPStatus is one server's status: "connected", "failed" (with Error),
// "disabled", "needs_auth", … ("pending" on 2.x while a connect runs).
type MCPStatus struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Read is one read of dir's MCP status, as it is at that moment (a
// poll that must see each change as soon as OpenCode says it; Status
// waits for a settled answer). On 2.x a location that is still
// booting answers an empty list and a server being connected is
// "pending": this read says so, Status waits them out.
func (o *OpenCode) Read(dir string) (map[string]MCPStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	route := "/mcp"
	if o.Gen == Gen2 {
		route = "/api/mcp"
	}
	code, body, err := o.Do(ctx, "GET", route, dir)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET %s for %s answered %d: %s", route, dir, code, body)
	}
	st := map[string]MCPStatus{}
	if o.Gen == Gen2 {
		var list struct {
			Data []struct {
				Name   string    `json:"name"`
				Status MCPStatus `json:"status"`
			} `json:"data"`
		}
		err = json.Unmarshal(body, &list)
		for _, s := range list.Data {
			st[s.Name] = s.Status
		}
	} else {
		err = json.Unmarshal(body, &st)
	}
	if err != nil {
		return nil, fmt.Errorf("GET %s body %q: %w", route, body, err)
	}
	return st, nil
}

// Status reads dir's MCP servers as a client does: like any client's
// read, it starts them when the directory is not in use yet. It answers
// as 1.x's GET /mcp does, once each server's connect has ended: 2.x
// answers at once, with an empty list while the location boots and
// "pending" while a connect runs, so on 2.x it reads again until every
// server the directory's config names is listed and none is pending (the
// config tells the empty list of a booting location from a location
// without servers).
func (o *OpenCode) Status(dir string) (map[string]MCPStatus, error) {
	if o.Gen != Gen2 {
		return o.Read(dir)
	}
	names, err := o.configured(dir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := o.Read(dir)
		if err != nil {
			return nil, err
		}
		if settled(st, names) {
			return st, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the MCP servers of %s did not settle within 90 s (configured %v, last read %+v)", dir, names, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settled: every configured server is listed and none is pending.
func settled(st map[string]MCPStatus, names []string) bool {
	for _, n := range names {
		if _, ok := st[n]; !ok {
			return false
		}
	}
	for _, s := range st {
		if s.Status == "pending" {
			return false
		}
	}
	return true
}

// configured lists the MCP servers the config of dir names (2.x GET
// /api/config: its documents' mcp.servers).
func (o *OpenCode) configured(dir string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	code, body, err := o.Do(ctx, "GET", "/api/config", dir)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET /api/config for %s answered %d: %s", dir, code, body)
	}
	var entries []struct {
		Type string `json:"type"`
		Info struct {
			MCP struct {
				Servers map[string]json.RawMessage `json:"servers"`
			} `json:"mcp"`
		} `json:"info"`
	}
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, fmt.Errorf("GET /api/config body %q: %w", body, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type == "document" {
			for n := range e.Info.MCP.Servers {
				names = append(names, n)
			}
		}
	}
	return names, nil
}

// ErrTimeout is returned by WaitStatus.
var ErrTimeout = errors.New("timed out")

// WaitStatus polls dir's MCP status until server name has status want.
// It returns how long that took, or ErrTimeout with the last status seen.
// Each poll is a single read (on 2.x it does not wait for a pending
// server), so it returns as soon as OpenCode says want.
func (o *OpenCode) WaitStatus(dir, name, want string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var last map[string]MCPStatus
	for time.Since(start) < timeout {
		st, err := o.Read(dir)
		if err == nil {
			last = st
			if st[name].Status == want {
				return time.Since(start), nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("server %q in %s not %q within %v (last status %+v): %w", name, dir, want, timeout, last, ErrTimeout)
}

// Dispose ends dir's instance (1.x POST /instance/dispose) or location
// (2.x DELETE /api/debug/location), its MCP servers with it, as a user's
// client does.
func (o *OpenCode) Dispose(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	method, route, want := "POST", "/instance/dispose", 200
	if o.Gen == Gen2 {
		method, route, want = "DELETE", "/api/debug/location", 204
	}
	code, body, err := o.Do(ctx, method, route, dir)
	if err != nil {
		return err
	}
	if code != want {
		return fmt.Errorf("%s %s for %s answered %d: %s", method, route, dir, code, body)
	}
	return nil
}

// ConfigFile is the name of a project's config file: opencode.json (1.x),
// opencode.jsonc (2.x).
func (g Generation) ConfigFile() string {
	if g == Gen2 {
		return "opencode.jsonc"
	}
	return "opencode.json"
}

// Disabled returns a copy of server's config marked disabled in g's
// words: 1.x "enabled": false, 2.x "disabled": true.
func (g Generation) Disabled(server map[string]any) map[string]any {
	c := make(map[string]any, len(server)+1)
	for k, v := range server {
		c[k] = v
	}
	if g == Gen2 {
		c["disabled"] = true
	} else {
		c["enabled"] = false
	}
	return c
}

// WriteConfig writes dir's config file (ConfigFile) naming servers:
// name → config, {"type": "local", "command": [...]} or {"type":
// "remote", "url": ...}, which both generations read alike, but for the
// disabled mark (Disabled). A mark in the other generation's words is
// refused: each ignores the other's, and a test's disabled server would
// start.
func (g Generation) WriteConfig(dir string, servers map[string]any) error {
	wrong := "disabled"
	if g == Gen2 {
		wrong = "enabled"
	}
	for name, s := range servers {
		if m, ok := s.(map[string]any); ok {
			if _, ok := m[wrong]; ok {
				return fmt.Errorf("server %q: OpenCode %s has no %q (use Generation.Disabled)", name, g, wrong)
			}
		}
	}
	if servers == nil {
		servers = map[string]any{}
	}
	doc := map[string]any{"$schema": "https://opencode.ai/config.json", "mcp": servers}
	if g == Gen2 {
		doc = map[string]any{"mcp": map[string]any{"servers": servers}}
	}
	return writeJSON(filepath.Join(dir, g.ConfigFile()), doc)
}
