package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
)

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
		// The service manager never reads half a file.
		if err := private.Replace(f.Path, f.Content, f.Mode.Perm()); err != nil {
			m.rollback(pl)
			return fmt.Errorf("service: writing %s: %w", f.Path, err)
		}
		fmt.Fprintf(w, "wrote %s\n", f.Path)
	}
	for _, c := range pl.Commands {
		out, err := m.env.Runner.Run(ctx, c)
		if err != nil {
			msg := fmt.Sprintf("service: %s failed: %v%s", shellquote.Join(c), err, indentOutput(out))
			if !pl.again {
				m.rollback(pl)
				return fmt.Errorf("%s\nnothing is installed (what was written is removed again)%s", msg, userManagerHint)
			}
			return fmt.Errorf("%s\nthe files are written; fix the problem and run `mcp-reconnect service install` again, or `mcp-reconnect service uninstall`%s", msg, userManagerHint)
		}
		fmt.Fprintf(w, "ran %s\n", shellquote.Join(c))
	}
	return nil
}

// userManagerHint follows a systemctl that failed.
const userManagerHint = "\n(systemctl --user needs the user's systemd: a login session, or `loginctl enable-linger` for a user without one)"

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
	if mf.Platform != platform {
		return nil, fmt.Errorf("service: manifest %s is for %s, not %s", m.ManifestPath(), mf.Platform, platform)
	}
	return &mf, nil
}
