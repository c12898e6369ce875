package opencode

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// An OpenCode 2 without GET /api/config that the process view found in
// another mount namespace (a container published on loopback) reads the
// container's config files, not this machine's. When it restarts (a new
// pid), the view has not decided about the new process yet: until it
// does, this machine's files must not be applied to it either.
func TestConfigFilesAreNotAppliedToARestartedOpenCodeOfAnotherNamespace(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, "opencode.json")
	if err := os.WriteFile(cfg, []byte(`{"mcp":{"servers":{"host-only":{"type":"local","command":["node","x.js"]}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENCODE_CONFIG_DIR", home)
	t.Setenv("OPENCODE_CONFIG", cfg)
	const host = "127.0.0.1:4096"
	var pid atomic.Int32
	pid.Store(4242)
	hosts := fakeopencode.NewHosts()
	t.Cleanup(hosts.Close)
	hosts.Serve(host, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/info":
			_, _ = fmt.Fprintf(w, `{"version":"2.0.21","pid":%d,"urls":[]}`, pid.Load())
		case "/openapi.json":
			_, _ = w.Write([]byte(locationsDoc)) // no /api/config
		default:
			http.NotFound(w, r)
		}
	}))
	s, err := NewServer(ServerOptions{URL: "http://" + host, Client: Options{Password: "pw", Transport: hosts.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := s.Detect(ctx); err != nil {
		t.Fatal(err)
	}
	s.SetConfigEnv(ConfigEnv{Generation: V2}) // the view: another mount namespace
	if got, err := s.MCPConfig(ctx, "/p"); err != nil || len(got) != 0 {
		t.Fatalf("config of an OpenCode in another namespace: %v, %v; want none of this machine's files", got, err)
	}
	pid.Store(4243) // it restarted; the view has not looked yet
	if _, _, err := s.Detect(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MCPConfig(ctx, "/p"); err != nil || len(got) != 0 {
		t.Fatalf("config right after it restarted: %v, %v; want none of this machine's files until the view decides", got, err)
	}
	s.SetConfigEnv(OwnConfigEnv(V2)) // the view: this one is local
	if got, err := s.MCPConfig(ctx, "/p"); err != nil || got["host-only"].Type != "local" {
		t.Fatalf("config once the view found it local: %v, %v; want this machine's files", got, err)
	}
}
