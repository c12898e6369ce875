package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// EnsureServiceWatch's lock is taken only by callers of
// EnsureServiceWatch; a daemon for the same service file that is starting
// (the one `service install` runs at login, or a `watch` typed by hand)
// registers only after it has detected every server (up to 5 s each) and
// bound its status API, and never takes the lock. A `run` in that window
// starts a second daemon for the same service: two engines check the same
// directories (rule 7) and double every connect.
func TestEnsureServiceWatchSeesAStartingDaemon(t *testing.T) {
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	const file = "/home/me/.local/state/opencode/service.json"
	slow := func(ctx context.Context) (string, string, error) {
		<-ctx.Done() // the service is slow to answer at login
		return "", "", ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: "http://127.0.0.1:1", Discover: slow, ServiceFile: file}},
			StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig(), NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true},
			slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		<-done
	}()
	time.Sleep(200 * time.Millisecond) // the service daemon is starting
	var starts atomic.Int32
	_, _ = EnsureServiceWatch(context.Background(), reg, file, func() error { starts.Add(1); return nil }, 100*time.Millisecond)
	if n := starts.Load(); n != 0 {
		t.Fatalf("EnsureServiceWatch started a second daemon for %s while one was starting for it", file)
	}
}
