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
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
)

// Manifest is what install wrote, kept as JSON at ManifestPath.
type Manifest struct {
	// Binary and Config are the Spec installed.
	Binary string `json:"binary"`
	Config string `json:"config,omitempty"`
	// SHA256 is the unit's as install wrote it.
	SHA256 string `json:"sha256"`
	// Dirs are directories that did not exist before install (created by
	// it or by systemctl enable), removed on uninstall when empty.
	Dirs []string `json:"dirs,omitempty"`
	// Installed is when, by which version.
	Installed time.Time `json:"installed"`
	Version   string    `json:"version,omitempty"`
}

// Marker starts every file install writes; a file at the service's path
// without it is the user's own, which install refuses to overwrite and
// uninstall leaves alone.
const Marker = "Written by `mcp-reconnect service install`"

// Install writes the unit that runs spec and the manifest, then enables
// and starts the unit (restarts it when it replaces one), saying what it
// does on w; with dryRun it prints each directory, each file with its
// path, mode and content (indented four spaces) and each command, and
// changes nothing. It refuses a unit of that name it did not write. When
// a command fails on a first install, what was written is removed again
// (so a failed install leaves nothing); a failed re-install keeps the
// files and says so.
func (m *Manager) Install(ctx context.Context, spec Spec, version string, now time.Time, w io.Writer, dryRun bool) error {
	if err := spec.validate(); err != nil {
		return err
	}
	if fi, err := os.Stat(m.env.Home); err != nil || !fi.IsDir() {
		return fmt.Errorf("service: home directory %s does not exist", m.env.Home)
	}
	unit, err := m.render(spec)
	if err != nil {
		return err
	}
	prev, err := m.readManifest()
	if err != nil {
		return err
	}
	path, mfPath := m.Path(), m.ManifestPath()
	b, err := os.ReadFile(path)
	switch {
	case err == nil && !ours(b, prev):
		return fmt.Errorf("service: %s exists and was not written by `mcp-reconnect service install`; move it away (or remove it) first", path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("service: %w", err)
	}
	again := prev != nil || err == nil
	var mkdirs []string
	for _, d := range slices.Concat(missingDirs(filepath.Dir(path)), missingDirs(filepath.Dir(mfPath))) {
		if !slices.Contains(mkdirs, d) {
			mkdirs = append(mkdirs, d)
		}
	}
	// systemctl enable makes the wants directory; removed with the
	// others when empty, and those a previous install created.
	dirs := slices.Concat(mkdirs, missingDirs(filepath.Join(filepath.Dir(path), "default.target.wants")))
	if prev != nil {
		dirs = append(dirs, prev.Dirs...)
	}
	slices.Sort(dirs)
	mf, err := json.MarshalIndent(Manifest{Binary: spec.Binary, Config: spec.Config, SHA256: sha256Hex(unit),
		Dirs: slices.Compact(dirs), Installed: now.UTC().Truncate(time.Second), Version: version}, "", "  ")
	if err != nil {
		return err
	}
	files := []struct {
		path    string
		mode    fs.FileMode
		content []byte
	}{{path, 0o644, unit}, {mfPath, 0o600, append(mf, '\n')}} // the manifest last
	rollback := func() {
		for i := len(files) - 1; i >= 0; i-- {
			_ = os.Remove(files[i].path)
		}
		for i := len(mkdirs) - 1; i >= 0; i-- {
			_ = os.Remove(mkdirs[i]) // only when empty
		}
	}
	for _, d := range mkdirs {
		if dryRun {
			fmt.Fprintf(w, "would create directory %s (mode 0700)\n", d)
		} else if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			rollback()
			return fmt.Errorf("service: %w", err)
		}
	}
	for _, f := range files {
		if dryRun {
			fmt.Fprintf(w, "would write %s (mode %04o):\n", f.path, f.mode)
			for _, line := range strings.SplitAfter(strings.TrimSuffix(string(f.content), "\n"), "\n") {
				fmt.Fprint(w, "    "+line)
			}
			fmt.Fprintln(w)
			continue
		}
		// systemd never reads half a file.
		if err := private.Replace(f.path, f.content, f.mode); err != nil {
			rollback()
			return fmt.Errorf("service: writing %s: %w", f.path, err)
		}
		fmt.Fprintf(w, "wrote %s\n", f.path)
	}
	cmds := [][]string{{"daemon-reload"}, {"enable", "--now", UnitName}}
	if again {
		// enable --now leaves a running daemon on the old unit.
		cmds = append(cmds, []string{"restart", UnitName})
	}
	for _, c := range cmds {
		if err := m.systemctl(ctx, w, dryRun, c...); err != nil && !again {
			rollback()
			return fmt.Errorf("service: %w\nnothing is installed (what was written is removed again)%s", err, userManagerHint)
		} else if err != nil {
			return fmt.Errorf("service: %w\nthe files are written; fix the problem and run `mcp-reconnect service install` again, or `mcp-reconnect service uninstall`%s", err, userManagerHint)
		}
	}
	return nil
}

// Uninstall stops the service and keeps it from starting at login, then
// removes the unit and manifest install wrote and the directories it
// created (when empty), and nothing else. Without a manifest it removes
// the unit only when install wrote it (it carries the Marker). It reports
// what it did on w; installed is false when there was nothing to remove.
func (m *Manager) Uninstall(ctx context.Context, w io.Writer, dryRun bool) (installed bool, err error) {
	mf, err := m.readManifest()
	if err != nil {
		return false, err
	}
	path := m.Path()
	var files, dirs []string
	switch b, err := os.ReadFile(path); {
	case err == nil && ours(b, mf), err != nil && mf != nil:
		files = []string{path}
	case err == nil && mf != nil:
		fmt.Fprintf(w, "left alone: %s (changed since install: it is yours now)\n", path)
	case err == nil:
		return false, fmt.Errorf("service: %s was not written by `mcp-reconnect service install` (it lacks its marker); left alone", path)
	case mf == nil:
		return false, nil
	}
	if mf != nil {
		files, dirs = append(files, m.ManifestPath()), mf.Dirs
	}
	removed := "removed"
	if dryRun {
		removed = "would remove"
	}
	stopErr := m.systemctl(ctx, w, dryRun, "disable", "--now", UnitName)
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
		} else if err := os.Remove(d); err == nil {
			fmt.Fprintf(w, "removed directory %s\n", d)
		}
	}
	if err := errors.Join(stopErr, m.systemctl(ctx, w, dryRun, "daemon-reload")); err != nil {
		return true, fmt.Errorf("service: the files are removed, but the service manager did not answer as expected, so the service may still run:\n%w%s", err, userManagerHint)
	}
	return true, nil
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
		return nil, fmt.Errorf("service: manifest %s: %w (remove it and the service file %s by hand)", m.ManifestPath(), err, m.Path())
	}
	return &mf, nil
}

// ours reports whether the unit's content b is install's: it carries the
// Marker, or it is exactly what the manifest says install wrote. A
// manifest alone is not enough: the user may have replaced the file since.
func ours(b []byte, mf *Manifest) bool {
	return bytes.Contains(b, []byte(Marker)) || mf != nil && mf.SHA256 == sha256Hex(b)
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
