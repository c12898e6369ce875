// Package registry records the mcp-reconnect daemons running for this user:
// one small JSON file per daemon, named by its pid, in a directory only the
// user can read, holding where its status API listens and the token its
// mutations need. The status and reconnect commands find daemons here, so
// nobody has to know a port, and nobody but the user learns a token.
//
// A daemon Registers at start and calls the returned function on exit. A
// daemon that died without it (SIGKILL) leaves a file behind; List skips it
// and removes it. A daemon that exited but was never reaped (a zombie: the
// OpenCode 2 `run` leaves its daemon to a parent that never waits) is not
// running, and neither is a later process that got the same pid.
package registry

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
)

// Entry is one running daemon.
type Entry struct {
	// PID is the daemon's process id.
	PID int `json:"pid"`
	// URLs are the OpenCode servers it watches.
	URLs []string `json:"urls"`
	// Service is the OpenCode 2 service file the daemon follows (it finds
	// the server's URL and password there, anew when it moves), or "".
	Service string `json:"service,omitempty"`
	// StatusAddr is host:port of its status API.
	StatusAddr string `json:"status_addr"`
	// Token authorizes mutations of its status API. Secret.
	Token string `json:"token"`
	// Version is the daemon's version.
	Version string `json:"version"`
	// Started is when the daemon started.
	Started time.Time `json:"started"`
	// ProcStart is the kernel's start time of process PID when it
	// registered (Linux: clock ticks since boot; macOS: microseconds since
	// the epoch), filled in by Register: a later process given the same
	// pid has another, so its entry is not taken for a running daemon.
	// Zero when it could not be read (then the pid alone decides).
	ProcStart uint64 `json:"proc_start,omitempty"`
}

// Watches reports whether e watches the OpenCode server at u (compared
// after normalizing scheme and host case and a trailing slash).
func (e Entry) Watches(u string) bool {
	n := NormalizeURL(u)
	return slices.ContainsFunc(e.URLs, func(w string) bool { return NormalizeURL(w) == n })
}

// ListensAt reports whether e's status API listens at addr, host:port
// compared as NormalizeURL compares URLs ("localhost:4097",
// "127.0.0.1:4097" and ":4097" are one address).
func (e Entry) ListensAt(addr string) bool {
	return NormalizeURL("http://"+e.StatusAddr) == NormalizeURL("http://"+addr)
}

// NormalizeURL makes two spellings of one OpenCode URL compare equal:
// "HTTP://LocalHost:4096/" and "http://127.0.0.1:4096". Scheme and host
// are lower-cased, credentials, query, fragment and trailing slashes
// dropped, the default port made explicit, "localhost" and no host at all
// read as 127.0.0.1 (OpenCode listens there by default; the status
// address is compared the same way) and an IP address written in its
// canonical form. It is the
// one comparison of OpenCode URLs: the registry, the status API's url
// field and the command line's "listed twice" check all use it.
func NormalizeURL(s string) string {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return strings.TrimRight(s, "/")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "localhost" || host == "" {
		host = "127.0.0.1"
	}
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	}
	if port == "" {
		port = defaultPorts[u.Scheme]
	}
	u.Host = host
	if port != "" {
		u.Host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		u.Host = "[" + host + "]"
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	u.User, u.RawQuery, u.Fragment, u.ForceQuery = nil, "", "", false
	return u.String()
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// Registry is a directory of daemon files.
type Registry struct {
	// Dir holds one <pid>.json per daemon.
	Dir string
}

// Default is the registry in $XDG_STATE_HOME/mcp-reconnect/daemons, or
// ~/.local/state/mcp-reconnect/daemons when XDG_STATE_HOME is unset.
func Default() (*Registry, error) {
	dir, err := private.StateDir("daemons")
	if err != nil {
		return nil, fmt.Errorf("registry of running daemons: %w", err)
	}
	return &Registry{Dir: dir}, nil
}

// NewToken returns a fresh random token (256 bits, hex).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ensureDir creates the directory 0700, or brings an existing one of ours
// to 0700; it refuses one owned by another user.
func (r *Registry) ensureDir() error {
	if err := private.EnsureDir(r.Dir); err != nil {
		return fmt.Errorf("registry %s: %w", r.Dir, err)
	}
	return nil
}

// The registry's locks: files in Dir that Lock takes.
const (
	// RegisterLock is held by a daemon from reading the entries to
	// writing its own, so that of two daemons started at once for one
	// OpenCode server, the second sees the first.
	RegisterLock = ".register.lock"
	// StartLock is held by a `run` from looking for the daemon of the
	// OpenCode 2 service to seeing the one it started registered, so
	// that two TUIs started at once start one daemon. It is not
	// RegisterLock: the daemon started registers meanwhile.
	StartLock = ".start.lock"
)

// Lock takes the lock name (RegisterLock, StartLock) of the registry
// (flock on that file in Dir), released by unlock or when the process
// ends. The holder removes the file before it unlocks, so nothing is
// left behind; a waiter that then wins the lock of the removed file sees
// that it is no longer the one at the path and takes that one instead.
func (r *Registry) Lock(name string) (unlock func(), err error) {
	if err := r.ensureDir(); err != nil {
		return nil, err
	}
	path := filepath.Join(r.Dir, name)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("registry lock: %w", err)
		}
		if testHookLockOpened != nil {
			testHookLockOpened()
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		var locked os.FileInfo
		if err == nil {
			locked, err = f.Stat()
		}
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("registry lock %s: %w", path, err)
		}
		if now, err := os.Stat(path); err == nil && os.SameFile(locked, now) {
			return func() {
				_ = os.Remove(path)
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		_ = f.Close() // the previous holder removed it: lock the one there now
	}
}

// testHookLockOpened, when set, runs in Lock between opening the lock file
// and locking it.
var testHookLockOpened func()

func (r *Registry) path(pid int) string {
	return filepath.Join(r.Dir, strconv.Itoa(pid)+".json")
}

// Register writes e (whose PID is normally os.Getpid()) as a 0600 file,
// atomically (a reader never sees half a file), and returns the function
// that removes it.
func (r *Registry) Register(e Entry) (remove func(), err error) {
	if e.PID <= 0 {
		return nil, fmt.Errorf("registry: bad pid %d", e.PID)
	}
	if err := r.ensureDir(); err != nil {
		return nil, err
	}
	if e.ProcStart == 0 {
		if p, err := readProc(e.PID); err == nil {
			e.ProcStart = p.start
		}
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, err
	}
	final := r.path(e.PID)
	if err := private.Replace(final, append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("registry: writing %s: %w", final, err)
	}
	return func() { _ = os.Remove(final) }, nil
}

// List returns the running daemons, oldest first. Files of daemons that
// are gone are removed; unreadable or foreign files are skipped. A missing
// directory is an empty registry.
func (r *Registry) List() ([]Entry, error) {
	ents, err := os.ReadDir(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", r.Dir, err)
	}
	var out []Entry
	for _, de := range ents {
		name := de.Name()
		pidStr, ok := strings.CutSuffix(name, ".json")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		p := filepath.Join(r.Dir, name)
		proc, ok := running(pid)
		if !ok {
			_ = os.Remove(p)
			continue
		}
		e, err := readEntry(p)
		if err != nil || e.PID != pid {
			continue
		}
		if e.ProcStart != 0 && proc.start != 0 && e.ProcStart != proc.start {
			_ = os.Remove(p) // the daemon is gone; another process has its pid
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.PID, b.PID)) })
	return out, nil
}

// readEntry reads one file, refusing one that another user could have
// written (its token would not be this user's secret).
func readEntry(p string) (Entry, error) {
	b, err := private.ReadFile(p, 1<<20)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// procInfo is what the kernel says of a process.
type procInfo struct {
	// exited: it exited and was not reaped (a zombie).
	exited bool
	// start is its start time in the kernel's own unit (see
	// Entry.ProcStart); zero when unknown.
	start uint64
}

// running reports whether a process with this pid exists and has not
// exited, with what the kernel says of it. kill(pid, 0) failing with
// EPERM means it exists but is another user's: a pid reused since our
// daemon died, which our own daemon cannot be; it counts as gone. A zombie
// passes kill(pid, 0), so the process state decides (procfs on Linux, the
// process table on macOS); where that cannot be read, kill alone does.
func running(pid int) (procInfo, bool) {
	if err := syscall.Kill(pid, 0); err != nil {
		return procInfo{}, false
	}
	p, err := readProc(pid)
	if err != nil {
		return procInfo{}, true
	}
	return p, !p.exited
}

// Running reports whether process pid runs, as running decides: the one
// test of a pid (an OpenCode 2 service's, a daemon's) this package's
// users make.
func Running(pid int) bool {
	_, ok := running(pid)
	return ok
}

// ByStatusAddr returns the running daemon whose status API listens at
// addr ("localhost:4097" and "127.0.0.1:4097" both match 127.0.0.1:4097).
func (r *Registry) ByStatusAddr(addr string) (Entry, bool, error) {
	all, err := r.List()
	if err != nil {
		return Entry{}, false, err
	}
	for _, e := range all {
		if e.ListensAt(addr) {
			return e, true, nil
		}
	}
	return Entry{}, false, nil
}
