// Package service installs `mcp-reconnect watch` as a per-user service that
// starts at login and restarts after a failure: a systemd user unit, on
// Linux only. Install records what it wrote in a small manifest so that
// Uninstall removes exactly that and nothing else, and Status compares
// what is installed with what Install would write now.
//
// Rendering and the command lists are plain functions of an Env; only a
// Runner touches the service manager. Other systems, macOS among them,
// get an error that says how to run the daemon there (New): a service of
// theirs is built when a test on such a system runs it.
package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Env is what the service needs from the machine. Tests supply their own.
type Env struct {
	// GOOS is the system: "linux" (systemd) or another, refused.
	GOOS string
	// Home is the user's home directory.
	Home string
	// Getenv reads the environment (XDG_CONFIG_HOME, XDG_STATE_HOME).
	Getenv func(string) string
	// Runner runs systemctl.
	Runner Runner
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

// FromOS is the Env of this process.
func FromOS(goos string) (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Env{}, fmt.Errorf("service: %w (set HOME)", err)
	}
	return Env{GOOS: goos, Home: home, Getenv: os.Getenv, Runner: ExecRunner{}}, nil
}

// xdg returns $name when it is an absolute path (the XDG spec ignores a
// relative one), else def.
func (e Env) xdg(name, def string) string {
	if v := e.Getenv(name); v != "" && filepath.IsAbs(v) {
		return v
	}
	return def
}

// pinnedEnv is the part of the installing user's environment the service
// must see too, or it would read another config file and register in
// another registry than the CLI reads: XDG_CONFIG_HOME and XDG_STATE_HOME
// when set. Never anything secret.
func (e Env) pinnedEnv() [][2]string {
	var out [][2]string
	for _, k := range []string{"XDG_CONFIG_HOME", "XDG_STATE_HOME"} {
		if v := e.xdg(k, ""); v != "" {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// plainPaths is plainText for the paths a unit names and the
// pinned environment it sets.
func (e Env) plainPaths(paths ...string) error {
	if err := plainText(paths...); err != nil {
		return err
	}
	for _, kv := range e.pinnedEnv() {
		if err := plainText(kv[1]); err != nil {
			return fmt.Errorf("$%s: %w", kv[0], err)
		}
	}
	return nil
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

// File is one file Install writes.
type File struct {
	Path    string
	Mode    fs.FileMode
	Content []byte
}

// Running is what the service manager says about the service.
type Running struct {
	// Active is true while the service's process runs.
	Active bool `json:"active"`
	// State is the manager's word for it ("active (running)",
	// "inactive (dead)", "not loaded").
	State string `json:"state"`
	// PID is the service's main process, 0 when none.
	PID int `json:"pid,omitempty"`
	// Restarts counts restarts the manager made, -1 when unknown.
	Restarts int `json:"restarts"`
	// Enabled says whether it starts at login, "" when unknown.
	Enabled string `json:"enabled,omitempty"`
}

// Manager installs, removes and inspects the service.
type Manager struct {
	env Env
	p   systemd
}

// platform is the manifest's and the report's name for the service
// manager.
const platform = "systemd"

// New returns the Manager, on Linux; on any other env.GOOS an error that
// says how to keep the daemon on there instead.
func New(env Env) (*Manager, error) {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if env.Runner == nil {
		env.Runner = ExecRunner{}
	}
	if !filepath.IsAbs(env.Home) {
		return nil, fmt.Errorf("service: home directory %q is not an absolute path", env.Home)
	}
	if env.GOOS == "linux" {
		return &Manager{env: env, p: systemd{env: env}}, nil
	}
	system, how := env.GOOS, "your own service manager"
	if system == "darwin" {
		system, how = "macOS", "a launchd agent or login item of your own (or `brew services start mcp-reconnect` when Homebrew installed it)"
	}
	return nil, fmt.Errorf("service: supported on Linux with systemd only, not on %s: run `mcp-reconnect watch` from %s: %w", system, how, errors.ErrUnsupported)
}

// Describe names the service for people.
func (m *Manager) Describe() string { return m.p.describe() }

// Logs says where the service logs.
func (m *Manager) Logs() string { return m.p.logs() }

// SecretsHint says where a password for the service goes.
func (m *Manager) SecretsHint() string { return m.p.secretsHint() }

// ManifestPath is where install records what it wrote:
// $XDG_STATE_HOME/mcp-reconnect/service-install.json (the state directory
// the registry of running daemons lives in).
func (m *Manager) ManifestPath() string {
	state := m.env.xdg("XDG_STATE_HOME", filepath.Join(m.env.Home, ".local", "state"))
	return filepath.Join(state, "mcp-reconnect", "service-install.json")
}

// SystemUnit is the unit of the service's name installed for every user
// (by the .deb or .rpm), "" when none. The unit install writes takes its
// place for this user.
func (m *Manager) SystemUnit() string { return m.p.systemUnit() }

// EnvFile is the optional environment file the unit reads
// (OPENCODE_SERVER_PASSWORD and the like).
func (m *Manager) EnvFile() string { return m.p.envFile() }
