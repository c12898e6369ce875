package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
)

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
	stopErr := m.runAll(ctx, w, m.p.stopCommands(), dryRun, m.p.notLoaded)
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
	stopErr = errors.Join(stopErr, m.runAll(ctx, w, m.p.afterRemoveCommands(), dryRun, nil))
	if stopErr != nil {
		return true, fmt.Errorf("service: the files are removed, but the service manager did not answer as expected, so the service may still run:\n%w%s", stopErr, userManagerHint)
	}
	return true, nil
}

// runAll runs cmds in order, or with dryRun says it would, and joins the
// errors of those that failed, but for those ok (nil: none) accepts.
func (m *Manager) runAll(ctx context.Context, w io.Writer, cmds [][]string, dryRun bool, ok func([]byte, error) bool) (errs error) {
	for _, c := range cmds {
		if dryRun {
			fmt.Fprintf(w, "would run: %s\n", shellquote.Join(c))
			continue
		}
		if out, err := m.env.Runner.Run(ctx, c); err != nil && (ok == nil || !ok(out, err)) {
			errs = errors.Join(errs, fmt.Errorf("%s failed: %v%s", shellquote.Join(c), err, indentOutput(out)))
		} else {
			fmt.Fprintf(w, "ran %s\n", shellquote.Join(c))
		}
	}
	return errs
}
