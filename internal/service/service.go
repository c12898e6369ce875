// Package service installs `mcp-reconnect watch` as a per-user service that
// starts at login and restarts after a failure: a systemd user unit, on
// Linux only. Install records what it wrote in a small manifest so that
// Uninstall removes exactly that and nothing else, and Status compares
// what is installed with what Install would write now.
//
// Rendering is a plain function of an Env; only Env.Run touches systemd.
// Other systems, macOS among them, get an error that says how to run the
// daemon there (New): a service of theirs is built when a test on such a
// system runs it.
package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Env is what the service needs from the machine. Tests supply their own.
type Env struct {
	// GOOS is the system: "linux" (systemd) or another, refused.
	GOOS string
	// Home is the user's home directory; "" is this process's.
	Home string
	// Getenv reads the environment (XDG_CONFIG_HOME, XDG_STATE_HOME); nil
	// is os.Getenv.
	Getenv func(string) string
	// Run runs systemctl and returns its combined output; nil runs it
	// from $PATH, for at most a minute.
	Run func(ctx context.Context, argv []string) ([]byte, error)
	// SystemUnitDirs are the directories where systemd finds user units
	// installed for every user (PackageUnitDir, where the .deb and .rpm
	// put theirs, among them), in systemd's order; nil means
	// DefaultSystemUnitDirs. Tests supply their own.
	SystemUnitDirs []string
}

// DefaultSystemUnitDirs are systemd's directories of user units for every
// user, the administrator's first (systemd.unit(5), "User Unit Search
// Path"), beneath each user's own ~/.config/systemd/user.
var DefaultSystemUnitDirs = []string{"/etc/systemd/user", "/usr/local/lib/systemd/user", PackageUnitDir}

// xdg returns $name when it is an absolute path (the XDG spec ignores a
// relative one), else def.
func (e Env) xdg(name, def string) string {
	if v := e.Getenv(name); v != "" && filepath.IsAbs(v) {
		return v
	}
	return def
}

// Spec is what the service runs.
type Spec struct {
	// Binary is the absolute path of mcp-reconnect.
	Binary string
	// Config is the absolute path of the config file given to install,
	// passed to watch as --config; "" leaves watch its default.
	Config string
}

// Args is the command line the service runs.
func (s Spec) Args() []string {
	args := []string{s.Binary, "watch"}
	if s.Config != "" {
		args = append(args, "--config", s.Config)
	}
	return args
}

func (s Spec) validate() error {
	if !filepath.IsAbs(s.Binary) {
		return fmt.Errorf("service: binary %q is not an absolute path", s.Binary)
	}
	if s.Config != "" && !filepath.IsAbs(s.Config) {
		return fmt.Errorf("service: config file %q is not an absolute path", s.Config)
	}
	return plainText(s.Args()...)
}

// plainText refuses control characters in a path or value: a newline
// would end a unit's line and start a directive of the path's choosing,
// and the daemon's arguments are no place for control characters.
func plainText(vs ...string) error {
	for _, v := range vs {
		if !utf8.ValidString(v) {
			return fmt.Errorf("service: %q is not valid UTF-8; use a plain path", v)
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffe || r == 0xffff }) {
			return fmt.Errorf("service: %q holds a control character; use a plain path", v)
		}
	}
	return nil
}

// Manager installs, removes and inspects the service.
type Manager struct{ env Env }

// New returns the Manager, on Linux; on any other env.GOOS an error that
// says how to keep the daemon on there instead.
func New(env Env) (*Manager, error) {
	if env.GOOS != "linux" {
		system, how := env.GOOS, "your own service manager"
		if system == "darwin" {
			system, how = "macOS", "a launchd agent or login item of your own (or `brew services start mcp-reconnect` when Homebrew installed it)"
		}
		return nil, fmt.Errorf("service: supported on Linux with systemd only, not on %s: run `mcp-reconnect watch` from %s: %w", system, how, errors.ErrUnsupported)
	}
	if env.Home == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("service: %w (set HOME)", err)
		}
		env.Home = home
	}
	if !filepath.IsAbs(env.Home) {
		return nil, fmt.Errorf("service: home directory %q is not an absolute path", env.Home)
	}
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Run == nil {
		env.Run = func(ctx context.Context, argv []string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			return exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		}
	}
	return &Manager{env: env}, nil
}

func (m *Manager) configHome() string {
	return m.env.xdg("XDG_CONFIG_HOME", filepath.Join(m.env.Home, ".config"))
}

// Path is the unit install writes.
func (m *Manager) Path() string {
	return filepath.Join(m.configHome(), "systemd", "user", UnitName)
}

// Describe names the service for people.
func (m *Manager) Describe() string { return "systemd user unit " + m.Path() }

// Logs says where the service logs.
const Logs = "the journal: journalctl --user -u " + UnitName

// ManifestPath is where install records what it wrote:
// $XDG_STATE_HOME/mcp-reconnect/service-install.json (the state directory
// the registry of running daemons lives in).
func (m *Manager) ManifestPath() string {
	state := m.env.xdg("XDG_STATE_HOME", filepath.Join(m.env.Home, ".local", "state"))
	return filepath.Join(state, "mcp-reconnect", "service-install.json")
}

// EnvFile is the optional environment file the unit reads when it exists
// ("-" prefix): the place for OPENCODE_SERVER_PASSWORD, chmod 600.
// Install never creates it.
func (m *Manager) EnvFile() string {
	return filepath.Join(m.configHome(), "mcp-reconnect", "env")
}

// SystemUnit is the unit of the service's name installed for every user
// (by the .deb or .rpm), "" when none: the first in SystemUnitDirs, as
// systemd searches them. The unit install writes takes its place for this
// user.
func (m *Manager) SystemUnit() string {
	dirs := m.env.SystemUnitDirs
	if dirs == nil {
		dirs = DefaultSystemUnitDirs
	}
	for _, d := range dirs {
		p := filepath.Join(d, UnitName)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}
