// Package ochost runs a hermetic `opencode serve` for the end-to-end tests
// and the demo: its own temporary HOME and XDG directories (the user's
// OpenCode config is never read or written), no network calls, a password,
// and its own loopback port. It also finds the binary that
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
	"sync"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
)

// Version is the OpenCode release the project is built and tested against.
const Version = "1.18.34"

// Binary returns the opencode binary: $OPENCODE_BIN, else the one
// scripts/install-opencode.sh puts under root/.cache.
func Binary(root string) string {
	if b := os.Getenv("OPENCODE_BIN"); b != "" {
		return b
	}
	return filepath.Join(root, ".cache", "opencode", "node_modules", "opencode-linux-x64", "bin", "opencode")
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
	// Port to listen on; 0 picks a free one.
	Port int
	// Home is the hermetic home; "" makes a new temporary one (removed by Kill).
	Home string
	// Password for the server; "" generates one.
	Password string
	// Env adds variables (e.g. OPENCODE_CONFIG_CONTENT).
	Env []string
}

// OpenCode is a running hermetic opencode serve.
type OpenCode struct {
	URL      string
	Port     int
	Password string
	Home     string
	// Output is what the server printed.
	Output  *Buffer
	cmd     *exec.Cmd
	ownHome bool
	done    chan struct{}
}

// Env is an environment that never touches the user's OpenCode config and
// makes no network call.
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

// SeedConfigDir stops OpenCode's hidden `npm install @opencode-ai/plugin`
// in dir: it is skipped when node_modules/ and a lock that lists the
// dependency exist.
func SeedConfigDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o700); err != nil {
		return err
	}
	lock := fmt.Sprintf(`{"name":"opencode","lockfileVersion":3,"requires":true,"packages":{"":{"dependencies":{"@opencode-ai/plugin":%q}}}}`, Version)
	return os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(lock), 0o600)
}

// Start starts `opencode serve` and waits until /global/health answers.
func Start(o Options) (*OpenCode, error) {
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("opencode binary: %w (run scripts/install-opencode.sh)", err)
	}
	oc := &OpenCode{Port: o.Port, Home: o.Home, Password: o.Password, Output: &Buffer{}, done: make(chan struct{})}
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
		if err := SeedConfigDir(filepath.Join(h, "config", "opencode")); err != nil {
			return nil, err
		}
	}
	if oc.Password == "" {
		oc.Password = fmt.Sprintf("pw-%d-%d", oc.Port, time.Now().UnixNano())
	}
	oc.URL = fmt.Sprintf("http://127.0.0.1:%d", oc.Port)
	oc.cmd = exec.Command(o.Binary, "serve", "--port", fmt.Sprint(oc.Port), "--hostname", "127.0.0.1")
	oc.cmd.Env = append(append(Env(oc.Home), o.Env...), "OPENCODE_SERVER_PASSWORD="+oc.Password)
	oc.cmd.Dir = oc.Home
	oc.cmd.Stdout, oc.cmd.Stderr = oc.Output, oc.Output
	// Its own process group: MCP servers are its children, and Kill ends
	// them with it.
	oc.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := oc.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = oc.cmd.Wait()
		close(oc.done)
	}()
	if err := oc.WaitHealthy(60 * time.Second); err != nil {
		oc.Kill()
		return nil, err
	}
	return oc, nil
}

// WaitHealthy polls /global/health with short timeouts (a request in the
// first half second after the port opens can hang).
func (o *OpenCode) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		code, _, err := o.Do(ctx, "GET", "/global/health", "")
		cancel()
		if err == nil && code == 200 {
			return nil
		}
		select {
		case <-o.done:
			return fmt.Errorf("opencode exited before it was healthy; output:\n%s", o.Output)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("opencode on port %d not healthy after %v (last: %d %v); output:\n%s", o.Port, timeout, code, err, o.Output)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PID is the server's process id.
func (o *OpenCode) PID() int { return o.cmd.Process.Pid }

// Kill ends OpenCode and its MCP children (its process group), and removes
// a home it made.
func (o *OpenCode) Kill() {
	if o.cmd == nil || o.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	<-o.done
	if o.ownHome {
		_ = os.RemoveAll(o.Home)
	}
}

// Do sends one authenticated request; dir, when set, is the directory query.
func (o *OpenCode) Do(ctx context.Context, method, path, dir string) (int, []byte, error) {
	u := o.URL + path
	if dir != "" {
		u += "?directory=" + url.QueryEscape(dir)
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

// MCPStatus is one server's entry in GET /mcp.
type MCPStatus struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Status reads GET /mcp for dir. Like any client's read, it starts the
// directory's MCP servers if they are not running.
func (o *OpenCode) Status(dir string) (map[string]MCPStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	code, body, err := o.Do(ctx, "GET", "/mcp", dir)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET /mcp for %s answered %d: %s", dir, code, body)
	}
	var st map[string]MCPStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("GET /mcp body %q: %w", body, err)
	}
	return st, nil
}

// ErrTimeout is returned by WaitStatus.
var ErrTimeout = errors.New("timed out")

// WaitStatus polls GET /mcp until server name in dir has status want.
// It returns how long that took, or ErrTimeout with the last status seen.
func (o *OpenCode) WaitStatus(dir, name, want string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var last map[string]MCPStatus
	for time.Since(start) < timeout {
		st, err := o.Status(dir)
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
