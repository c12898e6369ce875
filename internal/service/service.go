// Package service installs `mcp-reconnect watch` as a per-user service that
// starts at login and restarts after a failure: a systemd user unit on
// Linux, a launchd agent on macOS. Install records what it wrote in a small
// manifest so that Uninstall removes exactly that and nothing else, and
// Status compares what is installed with what Install would write now.
//
// Rendering and the command lists are plain functions of an Env, so both
// platforms are built and tested on Linux; only a Runner touches the
// service manager.
package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
)

// Env is what the service needs from the machine. Tests supply their own.
type Env struct {
	// GOOS picks the platform: "linux" (systemd) or "darwin" (launchd).
	GOOS string
	// Home is the user's home directory.
	Home string
	// Getenv reads the environment (XDG_CONFIG_HOME, XDG_STATE_HOME).
	Getenv func(string) string
	// UID is the user's id (launchd's gui/<uid> domain).
	UID int
	// Runner runs systemctl or launchctl.
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
	return Env{GOOS: goos, Home: home, Getenv: os.Getenv, UID: os.Getuid(), Runner: ExecRunner{}}, nil
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
// and control characters are not valid XML either.
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
	// State is the manager's word for it ("active (running)", "running",
	// "inactive (dead)", "not loaded").
	State string `json:"state"`
	// PID is the service's main process, 0 when none.
	PID int `json:"pid,omitempty"`
	// Restarts counts restarts the manager made, -1 when unknown.
	Restarts int `json:"restarts"`
	// Enabled says whether it starts at login, "" when unknown.
	Enabled string `json:"enabled,omitempty"`
}

// platform is one service manager.
type platform interface {
	// kind is the manifest's platform name: "systemd" or "launchd".
	kind() string
	// describe names the service for people: "systemd user unit PATH".
	describe() string
	// path is the unit or plist.
	path() string
	// render is the unit or plist for spec.
	render(spec Spec) (File, error)
	// managerDirs are directories the service manager creates when it
	// enables the service (default.target.wants): removed on uninstall
	// when install saw them appear and they are empty again.
	managerDirs() []string
	// installCommands start the service; again is true when a previous
	// install is being replaced.
	installCommands(again bool) [][]string
	// stopCommands stop the service and keep it from starting at login.
	stopCommands() [][]string
	// afterRemoveCommands run once the files are gone.
	afterRemoveCommands() [][]string
	// notLoaded reports whether a failed stop command only said the
	// service was not loaded, which is what uninstall wants anyway.
	notLoaded(out []byte, err error) bool
	// running asks the manager.
	running(ctx context.Context, r Runner) (Running, error)
	// logs says where the service's output goes.
	logs() string
	// secretsHint says where a password for the service goes.
	secretsHint() string
}

// Manager installs, removes and inspects the service on one platform.
type Manager struct {
	env Env
	p   platform
}

// New returns the Manager for env.GOOS.
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
	switch env.GOOS {
	case "linux":
		return &Manager{env: env, p: systemd{env: env}}, nil
	case "darwin":
		return &Manager{env: env, p: launchd{env: env}}, nil
	}
	return nil, fmt.Errorf("service: not supported on %s (systemd user units on Linux and launchd agents on macOS are); run `mcp-reconnect watch` from your own service manager", env.GOOS)
}

// Describe names the service for people.
func (m *Manager) Describe() string { return m.p.describe() }

// Path is the unit or plist file.
func (m *Manager) Path() string { return m.p.path() }

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
// (by the .deb or .rpm), "" when none or on platforms without one. The
// unit install writes takes its place for this user.
func (m *Manager) SystemUnit() string {
	if s, ok := m.p.(systemd); ok {
		return s.systemUnit()
	}
	return ""
}

// EnvFile is the optional environment file the systemd unit reads
// (OPENCODE_SERVER_PASSWORD and the like); "" on platforms without one.
func (m *Manager) EnvFile() string {
	if s, ok := m.p.(systemd); ok {
		return s.envFile()
	}
	return ""
}

// Manifest is what install wrote, kept as JSON at ManifestPath.
type Manifest struct {
	// Platform is "systemd" or "launchd".
	Platform string `json:"platform"`
	// Binary and Config are the Spec installed.
	Binary string `json:"binary"`
	Config string `json:"config,omitempty"`
	// Files are the files written, with the SHA-256 of what was written.
	Files []ManifestFile `json:"files"`
	// Dirs are directories that did not exist before install (created by
	// it or by the service manager), removed on uninstall when empty.
	Dirs []string `json:"dirs,omitempty"`
	// Installed is when, by which version.
	Installed time.Time `json:"installed"`
	Version   string    `json:"version,omitempty"`
}

// ManifestFile is one file in a Manifest.
type ManifestFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Plan is what Install does: the directories it creates, the files it
// writes (the manifest last), and the commands it runs, in order.
type Plan struct {
	MkDirs   []string
	Files    []File
	Commands [][]string
	// again is true when a previous install is replaced.
	again bool
	// manifest is the one the plan writes.
	manifest Manifest
}

// Marker starts every file install writes; a file at the service's path
// without it is the user's own, which install refuses to overwrite and
// uninstall leaves alone.
const Marker = "Written by `mcp-reconnect service install`"

// Plan computes what Install would do for spec, reading (never changing)
// the disk.
func (m *Manager) Plan(spec Spec, version string, now time.Time) (*Plan, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if err := m.checkBrew(); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(m.env.Home); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("service: home directory %s does not exist", m.env.Home)
	}
	f, err := m.p.render(spec)
	if err != nil {
		return nil, err
	}
	prev, err := m.readManifest()
	if err != nil {
		return nil, err
	}
	if err := m.checkOurs(f.Path, prev); err != nil {
		return nil, err
	}
	pl := &Plan{again: prev != nil || fileExists(f.Path)}
	created := map[string]bool{}
	if prev != nil {
		for _, d := range prev.Dirs {
			created[d] = true
		}
	}
	mf := m.ManifestPath()
	for _, p := range []string{f.Path, mf} {
		for _, d := range missingDirs(filepath.Dir(p)) {
			if !created[d] {
				created[d] = true
				pl.MkDirs = append(pl.MkDirs, d)
			}
		}
	}
	if s, ok := m.p.(launchd); ok {
		for _, d := range missingDirs(s.logDir()) {
			if !created[d] {
				created[d] = true
				pl.MkDirs = append(pl.MkDirs, d)
			}
		}
	}
	for _, d := range m.p.managerDirs() {
		for _, dd := range missingDirs(d) {
			created[dd] = true
		}
	}
	sum := sha256.Sum256(f.Content)
	pl.manifest = Manifest{
		Platform: m.p.kind(), Binary: spec.Binary, Config: spec.Config,
		Files:     []ManifestFile{{Path: f.Path, SHA256: hex.EncodeToString(sum[:])}},
		Installed: now.UTC().Truncate(time.Second), Version: version,
	}
	for d := range created {
		pl.manifest.Dirs = append(pl.manifest.Dirs, d)
	}
	sort.Strings(pl.manifest.Dirs)
	b, err := json.MarshalIndent(pl.manifest, "", "  ")
	if err != nil {
		return nil, err
	}
	pl.Files = []File{f, {Path: mf, Mode: 0o600, Content: append(b, '\n')}}
	pl.Commands = m.p.installCommands(pl.again)
	return pl, nil
}

// checkOurs refuses a file at path that install did not write: the user's
// own unit or plist of that name.
func (m *Manager) checkOurs(path string, prev *Manifest) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if ours(b, path, prev) {
		return nil
	}
	return fmt.Errorf("service: %s exists and was not written by `mcp-reconnect service install`; move it away (or remove it) first", path)
}

// ours reports whether the content b of the file at path is install's: it
// carries the Marker, or it is exactly what the manifest says install
// wrote there. A manifest naming the path is not enough: the user may have
// replaced the file since.
func ours(b []byte, path string, mf *Manifest) bool {
	if bytes.Contains(b, []byte(Marker)) {
		return true
	}
	if mf == nil {
		return false
	}
	sum := sha256.Sum256(b)
	for _, f := range mf.Files {
		if f.Path == path && f.SHA256 == hex.EncodeToString(sum[:]) {
			return true
		}
	}
	return false
}

// missingDirs lists dir and those of its parents that do not exist,
// outermost first.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// Print writes the plan for people: each directory, each file with its
// path, mode and content (indented four spaces), then each command.
func (pl *Plan) Print(w io.Writer) error {
	var b strings.Builder
	for _, d := range pl.MkDirs {
		fmt.Fprintf(&b, "would create directory %s (mode 0700)\n", d)
	}
	for _, f := range pl.Files {
		fmt.Fprintf(&b, "would write %s (mode %04o):\n", f.Path, f.Mode.Perm())
		for _, line := range strings.SplitAfter(strings.TrimSuffix(string(f.Content), "\n"), "\n") {
			b.WriteString("    " + line)
		}
		b.WriteString("\n")
	}
	for _, c := range pl.Commands {
		fmt.Fprintf(&b, "would run: %s\n", shellquote.Join(c))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Install carries out pl. When a command fails on a first install, what
// was written is removed again (so a failed install leaves nothing); a
// failed re-install keeps the files and says so.
func (m *Manager) Install(ctx context.Context, pl *Plan, w io.Writer) error {
	for _, d := range pl.MkDirs {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			m.rollback(pl)
			return fmt.Errorf("service: %w", err)
		}
	}
	for _, f := range pl.Files {
		if err := writeAtomic(f); err != nil {
			m.rollback(pl)
			return err
		}
		fmt.Fprintf(w, "wrote %s\n", f.Path)
	}
	for _, c := range pl.Commands {
		out, err := m.env.Runner.Run(ctx, c)
		if err != nil {
			msg := fmt.Sprintf("service: %s failed: %v%s", shellquote.Join(c), err, indentOutput(out))
			if !pl.again {
				m.rollback(pl)
				return fmt.Errorf("%s\nnothing is installed (what was written is removed again)%s", msg, m.hint())
			}
			return fmt.Errorf("%s\nthe files are written; fix the problem and run `mcp-reconnect service install` again, or `mcp-reconnect service uninstall`%s", msg, m.hint())
		}
		fmt.Fprintf(w, "ran %s\n", shellquote.Join(c))
	}
	return nil
}

func (m *Manager) hint() string {
	if m.p.kind() == "systemd" {
		return "\n(systemctl --user needs the user's systemd: a login session, or `loginctl enable-linger` for a user without one)"
	}
	return ""
}

func indentOutput(out []byte) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return ""
	}
	return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// rollback removes what a failed first install wrote.
func (m *Manager) rollback(pl *Plan) {
	for i := len(pl.Files) - 1; i >= 0; i-- {
		_ = os.Remove(pl.Files[i].Path)
	}
	for i := len(pl.MkDirs) - 1; i >= 0; i-- {
		_ = os.Remove(pl.MkDirs[i]) // only when empty
	}
}

// writeAtomic writes f through a temporary file in its directory, so the
// service manager never reads half a file.
func writeAtomic(f File) error {
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".tmp-"+filepath.Base(f.Path)+"-*")
	if err != nil {
		return fmt.Errorf("service: writing %s: %w", f.Path, err)
	}
	_, werr := tmp.Write(f.Content)
	if werr == nil {
		werr = tmp.Chmod(f.Mode.Perm())
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), f.Path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("service: writing %s: %w", f.Path, werr)
	}
	return nil
}

// readManifest returns the manifest, nil when there is none.
func (m *Manager) readManifest() (*Manifest, error) {
	b, err := os.ReadFile(m.ManifestPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	var mf Manifest
	if err := json.Unmarshal(b, &mf); err != nil {
		return nil, fmt.Errorf("service: manifest %s: %w (remove it and the service file %s by hand)", m.ManifestPath(), err, m.p.path())
	}
	if mf.Platform != m.p.kind() {
		return nil, fmt.Errorf("service: manifest %s is for %s, not %s", m.ManifestPath(), mf.Platform, m.p.kind())
	}
	return &mf, nil
}

// Uninstall stops the service and keeps it from starting at login, then
// removes the files install wrote and the directories it created (when
// empty), and nothing else. Without a manifest it removes the service file
// only when install wrote it (it carries the Marker). It reports what it
// did on w; installed is false when there was nothing to remove.
func (m *Manager) Uninstall(ctx context.Context, w io.Writer, dryRun bool) (installed bool, err error) {
	mf, err := m.readManifest()
	if err != nil {
		return false, err
	}
	var files, dirs []string
	if mf != nil {
		for _, f := range mf.Files {
			// Only the service's own file: a manifest that names
			// anything else was not written by install.
			if f.Path == m.p.path() {
				b, err := os.ReadFile(f.Path)
				switch {
				case errors.Is(err, fs.ErrNotExist):
				case err == nil && !ours(b, f.Path, mf):
					fmt.Fprintf(w, "left alone: %s (changed since install: it is yours now)\n", f.Path)
				default:
					files = append(files, f.Path)
				}
			} else {
				fmt.Fprintf(w, "left alone: %s (named by %s, but not the service's file)\n", f.Path, m.ManifestPath())
			}
		}
		dirs = mf.Dirs
	} else if b, err := os.ReadFile(m.p.path()); err == nil && bytes.Contains(b, []byte(Marker)) {
		files = []string{m.p.path()}
	} else if err == nil {
		return false, fmt.Errorf("service: %s was not written by `mcp-reconnect service install` (it lacks its marker); left alone", m.p.path())
	} else {
		return false, nil
	}
	removed := "removed"
	if dryRun {
		removed = "would remove"
	}
	var stopErr error
	for _, c := range m.p.stopCommands() {
		if dryRun {
			fmt.Fprintf(w, "would run: %s\n", shellquote.Join(c))
			continue
		}
		out, err := m.env.Runner.Run(ctx, c)
		if err != nil && !m.p.notLoaded(out, err) {
			stopErr = errors.Join(stopErr, fmt.Errorf("%s failed: %v%s", shellquote.Join(c), err, indentOutput(out)))
			continue
		}
		fmt.Fprintf(w, "ran %s\n", shellquote.Join(c))
	}
	if mf != nil {
		files = append(files, m.ManifestPath())
	}
	for _, f := range files {
		if !fileExists(f) {
			continue
		}
		if !dryRun {
			if err := os.Remove(f); err != nil {
				return true, fmt.Errorf("service: %w", err)
			}
		}
		fmt.Fprintf(w, "%s %s\n", removed, f)
	}
	// Deepest first, and only empty ones: a directory install created
	// that the user has since put files in is theirs now.
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if dryRun {
			fmt.Fprintf(w, "would remove directory %s if empty\n", d)
			continue
		}
		if err := os.Remove(d); err == nil {
			fmt.Fprintf(w, "removed directory %s\n", d)
		}
	}
	for _, c := range m.p.afterRemoveCommands() {
		if dryRun {
			fmt.Fprintf(w, "would run: %s\n", shellquote.Join(c))
			continue
		}
		if out, err := m.env.Runner.Run(ctx, c); err != nil {
			stopErr = errors.Join(stopErr, fmt.Errorf("%s failed: %v%s", shellquote.Join(c), err, indentOutput(out)))
		} else {
			fmt.Fprintf(w, "ran %s\n", shellquote.Join(c))
		}
	}
	if stopErr != nil {
		return true, fmt.Errorf("service: the files are removed, but the service manager did not answer as expected, so the service may still run:\n%w%s", stopErr, m.hint())
	}
	return true, nil
}

// Report is what Status found.
type Report struct {
	// Platform is "systemd" or "launchd"; Path the unit or plist.
	Platform string `json:"platform"`
	Path     string `json:"path"`
	// Installed is true when the service file (Path) exists.
	Installed bool `json:"installed"`
	// SystemUnit is a unit of the service's name installed for every user
	// (by the .deb or .rpm, in PackageUnitDir), "" when none: systemd runs
	// it for a user who has no unit of that name at Path, which takes its
	// place.
	SystemUnit string `json:"system_unit,omitempty"`
	// Manifest is what install recorded, nil when none.
	Manifest *Manifest `json:"manifest,omitempty"`
	// Current is true when the file is exactly what install would write
	// now; Differs says why not.
	Current bool   `json:"current"`
	Differs string `json:"differs,omitempty"`
	// Running is what the service manager says; RunningError why it
	// could not be asked.
	Running      *Running `json:"running,omitempty"`
	RunningError string   `json:"running_error,omitempty"`
	// Logs says where the service logs.
	Logs string `json:"logs"`
	// EnvFile is the systemd unit's environment file and EnvFileState
	// "absent", "private" or a problem.
	EnvFile      string `json:"env_file,omitempty"`
	EnvFileState string `json:"env_file_state,omitempty"`
	// Brew is a `brew services` install of the same daemon, nil when none.
	Brew *BrewService `json:"brew,omitempty"`
}

// Status inspects the service: the file against what install would write
// now for binary (the config file as installed), and the manager.
func (m *Manager) Status(ctx context.Context, binary string) (Report, error) {
	r := Report{Platform: m.p.kind(), Path: m.p.path(), Logs: m.p.logs()}
	mf, err := m.readManifest()
	if err != nil {
		return r, err
	}
	r.Manifest = mf
	b, err := os.ReadFile(r.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return r, fmt.Errorf("service: %w", err)
	default:
		r.Installed = true
		spec := Spec{Binary: binary}
		if mf != nil {
			spec.Config = mf.Config
		}
		want, err := m.p.render(spec)
		switch {
		case err != nil:
			r.Differs = err.Error()
		case bytes.Equal(b, want.Content):
			r.Current = true
		case !bytes.Contains(b, []byte(Marker)):
			r.Differs = "it was not written by `mcp-reconnect service install`"
		case mf != nil && !hashIs(b, mf, r.Path):
			r.Differs = "it was edited since install"
		case mf != nil && mf.Binary != binary:
			r.Differs = fmt.Sprintf("it runs %s, this is %s", mf.Binary, binary)
		default:
			r.Differs = "its settings are not what install would write now (the environment changed, or another version wrote it)"
		}
	}
	r.SystemUnit = m.SystemUnit()
	if ef := m.EnvFile(); ef != "" {
		r.EnvFile, r.EnvFileState = ef, envFileState(ef)
	}
	run, err := m.p.running(ctx, m.env.Runner)
	if err != nil {
		r.RunningError = err.Error()
	} else {
		r.Running = &run
	}
	r.Brew = m.brew(ctx)
	return r, nil
}

func hashIs(b []byte, mf *Manifest, path string) bool {
	sum := sha256.Sum256(b)
	for _, f := range mf.Files {
		if f.Path == path {
			return f.SHA256 == hex.EncodeToString(sum[:])
		}
	}
	return false
}

// CheckEnvFile checks the environment file the systemd unit hands the
// daemon (CheckEnvFileAt): an error refuses it, a warning is for the
// user. Platforms without one: "", nil.
func (m *Manager) CheckEnvFile() (warning string, err error) {
	ef := m.EnvFile()
	if ef == "" {
		return "", nil
	}
	warning, err = CheckEnvFileAt(ef)
	if err != nil {
		return "", fmt.Errorf("service: %w", err)
	}
	return warning, nil
}

// envFileState is the environment file as status shows it: "absent",
// "private", or what is wrong with it.
func envFileState(p string) string {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	warning, err := CheckEnvFileAt(p)
	switch {
	case err != nil:
		return "refused by the service: " + err.Error()
	case warning != "":
		return warning
	}
	return "private"
}
