package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// OpenCode 2 runs one background service per user, shared by every TUI
// and CLI (see the v2 facts): a 2.x TUI attaches to it instead of serving
// itself. `run` then makes sure one daemon watches that service, started
// once and outliving the TUI, and gets out of the way.
//
// The service writes its service.json when it starts and removes it at a
// clean exit, so a daemon started at login normally finds none: it
// follows the file, whenever it appears, and after the service goes away,
// whenever it comes back.

// followRetry spaces the event stream's attempts of a server found
// through a service file (the default caps at 30 s): while no service
// runs, an attempt is a stat of the file (and, with the 1.x fallback, one
// refused loopback connection), so one every few seconds costs nothing,
// and a service that starts later is followed within about 5 s.
var followRetry = backoff.Policy{Initial: 500 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}

// serviceURL is where the shared service usually listens (macOS and
// Linux), shown until its service file says otherwise.
const serviceURL = "http://127.0.0.1:49374"

// ServiceServer is the OpenCode 2 background service registered in file,
// as one server to watch: its URL and password are read from the file,
// and verified against the server (pid, version), at start and again
// whenever the server cannot be reached, so a service that starts after
// the daemon, restarts on another port or with another password, or goes
// away and comes back is followed. The password stays in memory.
//
// With channels, the other release channels' service-<channel>.json
// beside file are looked at too, when file names no running service (the
// most recently written first). With fallback, while no service answers,
// the server watched is fallback if OpenCode answers there (1.x at its
// default address, for a daemon told nothing else): one engine for
// whichever OpenCode the user runs by default. It stays with the fallback
// until that cannot be reached; then the service files are read again.
func ServiceServer(file string, channels bool, fallback *Server) Server {
	files := func() []string { return []string{file} }
	if channels {
		files = func() []string { return opencode.ServiceFiles(file) }
	}
	sc := Server{ServiceFile: file, URL: serviceURL}
	if fallback != nil {
		sc.URL, sc.Username = fallback.URL, fallback.Username
	}
	for _, f := range files() {
		if svc, err := opencode.ReadServiceFile(f); err == nil {
			sc.URL = svc.URL
			break
		}
	}
	sc.Discover = func(ctx context.Context) (string, string, error) {
		svc, err := opencode.FindService(ctx, files(), opencode.Options{})
		if err == nil || fallback == nil || errors.Is(err, opencode.ErrUnauthorized) {
			return svc.URL, svc.Password(), err
		}
		// No service runs: the fallback, if OpenCode answers there. One
		// that refuses the credentials is not the user's default OpenCode
		// (they gave none), and must not end the daemon: it keeps looking
		// for the service.
		_, _, _, ferr := opencode.Detect(ctx, fallback.URL, opencode.Options{Username: fallback.Username, Password: fallback.Password})
		switch {
		case ferr == nil:
			return fallback.URL, fallback.Password, nil
		case errors.Is(ferr, opencode.ErrUnauthorized):
			return "", "", fmt.Errorf("%w: %v; and OpenCode at %s refused the credentials (give its password to watch it)", opencode.ErrUnavailable, err, fallback.URL)
		}
		return "", "", fmt.Errorf("%w: %v; and no OpenCode answers at %s", opencode.ErrUnavailable, err, fallback.URL)
	}
	return sc
}

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
