package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// One OpenCode server, one daemon. Two daemons watching the same server
// each read its status and each connect what is failed: a crashed stdio
// server is spawned twice (seen on a real OpenCode 2 build: both
// connected it within 3 ms), and each keeps its own backoff, so the
// budget and the crash-loop backoff mean half as much. A daemon therefore
// refuses to start for a server that a running daemon of this user
// already watches, unless told to (Config.AllowDuplicate, watch
// --allow-duplicate).

// DuplicateError is the refusal: Running already watches URL (or follows
// the same OpenCode 2 service file).
type DuplicateError struct {
	// URL is the OpenCode server both would watch.
	URL string
	// Running is the daemon that watches it.
	Running registry.Entry
}

func (e *DuplicateError) Error() string {
	r := e.Running
	what := "OpenCode server " + e.URL
	if r.Service != "" && !r.Watches(e.URL) {
		what = "the OpenCode 2 service of " + r.Service
	}
	return fmt.Sprintf("%s is already watched by a running mcp-reconnect daemon: pid %d, status api %s, watching %s; "+
		"two daemons would both reconnect every crashed MCP server (a stdio server spawned twice). "+
		"Use that one (mcp-reconnect status), stop it (kill %d), or start watch with --allow-duplicate to run a second one anyway",
		what, r.PID, r.StatusAddr, strings.Join(r.URLs, ", "), r.PID)
}

// findDuplicate returns the error naming the first running daemon other
// than process self that watches one of urls (compared normalised) or
// follows serviceFile (the same file), or nil.
func findDuplicate(entries []registry.Entry, self int, urls []string, serviceFile string) error {
	for _, e := range entries {
		if e.PID == self {
			continue
		}
		if serviceFile != "" && e.Service != "" && sameFile(serviceFile, e.Service) {
			u := serviceFile
			if len(urls) > 0 {
				u = urls[0]
			}
			return &DuplicateError{URL: u, Running: e}
		}
		for _, u := range urls {
			if e.Watches(u) {
				return &DuplicateError{URL: u, Running: e}
			}
		}
	}
	return nil
}

// sameFile reports whether a and b name one file: the same clean path,
// or two paths to one existing file, or, while neither exists (an
// OpenCode 2 service file before the service writes it), one name in
// one existing directory.
func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil || errB == nil {
		return errA == nil && errB == nil && os.SameFile(fa, fb)
	}
	if filepath.Base(a) != filepath.Base(b) {
		return false
	}
	da, errA := os.Stat(filepath.Dir(a))
	db, errB := os.Stat(filepath.Dir(b))
	return errA == nil && errB == nil && os.SameFile(da, db)
}

// refuseDuplicate is the early check, before the status API listens: a
// second `watch` with the default status address would otherwise fail on
// the taken port without naming the daemon that holds it. It is not
// atomic; registerUnique is.
func refuseDuplicate(cfg Config, urls []string, serviceFile string) error {
	if cfg.AllowDuplicate {
		return nil
	}
	if reg, err := cfg.registry(); err == nil {
		if entries, err := reg.List(); err == nil {
			return findDuplicate(entries, os.Getpid(), urls, serviceFile)
		}
	}
	return nil // register says why; the daemon still does its job
}

// registerUnique writes e to reg unless (allow aside) a running daemon
// already watches one of e's URLs or follows its service file. The check
// and the write hold the registry's lock, so of two daemons started at
// once for one server one registers and the other is refused.
func registerUnique(reg *registry.Registry, e registry.Entry, allow bool) (remove func(), err error) {
	unlock, err := reg.Lock(registry.RegisterLock)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !allow {
		entries, err := reg.List()
		if err != nil {
			return nil, err
		}
		if err := findDuplicate(entries, e.PID, e.URLs, e.Service); err != nil {
			return nil, err
		}
	}
	if testHookChecked != nil {
		testHookChecked()
	}
	return reg.Register(e)
}

// testHookChecked, when set, runs between the check and the write.
var testHookChecked func()
