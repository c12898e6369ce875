package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// A --directory reached through a symlink is the directory the TUI uses,
// its physical path (getcwd): OpenCode keys an instance (2.x: a location)
// by the exact string it is sent, so the link's path would boot a second
// instance, and a second MCP fleet, beside the TUI's. On either
// generation.
func TestDirectoryFlagThroughSymlinkIsThePhysicalDirectory(t *testing.T) {
	physical, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "code")
	if err := os.Symlink(physical, link); err != nil {
		t.Fatal(err)
	}
	type fake interface {
		http.Handler
		SetHeartbeat(time.Duration)
		Instances() []string
	}
	for _, gen := range []struct {
		name, host, password string
		new                  func() fake
		activity             string
	}{
		{"1.x", host1, "pw", func() fake {
			f := fakeopencode.New(map[string]fakeopencode.Spec{"fs": {}})
			f.Password = "pw"
			return f
		}, "session.updated"},
		{"2.x", host2, fake2.DefaultPassword, func() fake { return fake2.New(map[string]fakeopencode.Spec{"fs": {}}) }, "session.created"},
	} {
		t.Run(gen.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := gen.new()
				f.SetHeartbeat(10 * time.Second)
				hosts := fakeopencode.NewHosts()
				hosts.Serve(gen.host, f)
				cfg := Config{
					Servers:     []Target{{URL: "http://" + gen.host, Password: gen.password, Transport: hosts.Transport()}},
					Directories: []string{link}, // the user's --directory
					Engine:      reconnect.DefaultConfig, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
				defer func() {
					cancel()
					<-done
					hosts.Close()
				}()
				time.Sleep(time.Second)
				synctest.Wait()
				// The TUI, started in that project, names its getcwd.
				switch p := f.(type) {
				case *fakeopencode.Server:
					p.Publish(physical, gen.activity, nil)
				case *fake2.Server:
					p.Publish(physical, gen.activity, map[string]any{"sessionID": "ses_1"})
				}
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if inst := f.Instances(); len(inst) != 1 || inst[0] != physical {
					t.Fatalf("instances %q: the --directory %s (-> %s) must be the one instance %s", inst, link, physical, physical)
				}
			})
		})
	}
}

// A directory that does not exist (yet) is only made absolute.
func TestPhysicalDirOfMissingDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not", "yet")
	got, err := PhysicalDir(missing)
	if err != nil || got != missing {
		t.Fatalf("PhysicalDir(%s) = %q, %v", missing, got, err)
	}
}
