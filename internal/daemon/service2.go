package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// OpenCode 2 runs one background service per user, shared by every TUI
// and CLI (see the v2 facts): a 2.x TUI attaches to it instead of serving
// itself. `run` then makes sure one daemon watches that service, started
// once and outliving the TUI, and gets out of the way.

// ServiceWatched reports whether a running daemon follows the OpenCode 2
// service file file, or watches the URL it names (a daemon started for it
// would refuse to run beside that one: see duplicate.go).
func ServiceWatched(reg *registry.Registry, file string) (bool, error) {
	entries, err := reg.List()
	if err != nil {
		return false, err
	}
	var urls []string
	if svc, err := opencode.ReadServiceFile(file); err == nil {
		urls = append(urls, svc.URL)
	}
	return findDuplicate(entries, 0, urls, file) != nil, nil
}

// EnsureServiceWatch starts a daemon for the OpenCode 2 service file file
// unless one runs already, and waits (up to wait) until it has registered.
// Callers on one machine take turns (a lock in the registry directory), so
// two TUIs started at once start one daemon. It reports whether it started
// one.
func EnsureServiceWatch(ctx context.Context, reg *registry.Registry, file string, start func() error, wait time.Duration) (bool, error) {
	unlock, err := lockRegistry(reg)
	if err != nil {
		return false, err
	}
	defer unlock()
	if ok, err := ServiceWatched(reg, file); err != nil || ok {
		return false, err
	}
	if err := start(); err != nil {
		return false, fmt.Errorf("starting a daemon for the OpenCode 2 service: %w", err)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, _ := ServiceWatched(reg, file); ok {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-deadline.C:
			return true, errors.New("the daemon started for the OpenCode 2 service did not register in time; see its log")
		case <-tick.C:
		}
	}
}
