package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Homebrew's `brew services start mcp-reconnect` keeps the formula's
// daemon on with a service file of its own, named after the formula: a
// launchd agent homebrew.mxcl.mcp-reconnect on macOS, a systemd user unit
// homebrew.mcp-reconnect.service (always under ~/.config) on Linux. It
// runs the same `mcp-reconnect watch`, so install must not start a second
// daemon beside it, and status reports it.

// BrewFormula is the formula's name, which brew services names its files
// after.
const BrewFormula = "mcp-reconnect"

// BrewService is a `brew services` install of the daemon.
type BrewService struct {
	// Path is Homebrew's agent or unit.
	Path string `json:"path"`
	// Running is what the service manager says of it; RunningError why
	// it could not be asked.
	Running      *Running `json:"running,omitempty"`
	RunningError string   `json:"running_error,omitempty"`
}

// brewPath is where brew services puts the formula's service file.
func (m *Manager) brewPath() string {
	if m.p.kind() == "launchd" {
		return filepath.Join(m.env.Home, "Library", "LaunchAgents", "homebrew.mxcl."+BrewFormula+".plist")
	}
	return filepath.Join(m.env.Home, ".config", "systemd", "user", "homebrew."+BrewFormula+".service")
}

// brewInstalled reports whether brew services keeps the daemon on.
func (m *Manager) brewInstalled() (bool, error) {
	_, err := os.Stat(m.brewPath())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// checkBrew refuses an install beside brew services' own.
func (m *Manager) checkBrew() error {
	if ok, _ := m.brewInstalled(); !ok {
		return nil
	}
	return fmt.Errorf("service: Homebrew already keeps mcp-reconnect running (%s, from `brew services start mcp-reconnect`); a second daemon would watch the same OpenCode: keep Homebrew's (`brew services info mcp-reconnect`), or run `brew services stop mcp-reconnect` first", m.brewPath())
}

// brew is the brew services install, nil when there is none.
func (m *Manager) brew(ctx context.Context) *BrewService {
	if ok, err := m.brewInstalled(); !ok {
		if err != nil {
			return &BrewService{Path: m.brewPath(), RunningError: err.Error()}
		}
		return nil
	}
	b := &BrewService{Path: m.brewPath()}
	var run Running
	var err error
	switch p := m.p.(type) {
	case launchd:
		run, err = p.print(ctx, m.env.Runner, p.domain()+"/homebrew.mxcl."+BrewFormula)
	case systemd:
		run, err = p.show(ctx, m.env.Runner, "homebrew."+BrewFormula+".service")
	}
	if err != nil {
		b.RunningError = err.Error()
	} else {
		b.Running = &run
	}
	return b
}
