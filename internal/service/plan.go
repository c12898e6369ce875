package service

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
)

// Manifest is what install wrote, kept as JSON at ManifestPath.
type Manifest struct {
	// Platform is "systemd".
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
	for _, dir := range []string{filepath.Dir(f.Path), filepath.Dir(mf)} {
		for _, d := range missingDirs(dir) {
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
	pl.manifest = Manifest{
		Platform: platform, Binary: spec.Binary, Config: spec.Config,
		Files:     []ManifestFile{{Path: f.Path, SHA256: sha256Hex(f.Content)}},
		Dirs:      slices.Sorted(maps.Keys(created)),
		Installed: now.UTC().Truncate(time.Second), Version: version,
	}
	b, err := json.MarshalIndent(pl.manifest, "", "  ")
	if err != nil {
		return nil, err
	}
	pl.Files = []File{f, {Path: mf, Mode: 0o600, Content: append(b, '\n')}}
	pl.Commands = m.p.installCommands(pl.again)
	return pl, nil
}

// checkOurs refuses a file at path that install did not write: the user's
// own unit of that name.
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
	sum := sha256Hex(b)
	return mf != nil && slices.ContainsFunc(mf.Files, func(f ManifestFile) bool { return f.Path == path && f.SHA256 == sum })
}

// sha256Hex is the manifest's record of content b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
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
