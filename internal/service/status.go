package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Report is what Status found.
type Report struct {
	// Path is the unit.
	Path string `json:"path"`
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
}

// Running is what systemd says about the service.
type Running struct {
	// Active is true while the service's process runs.
	Active bool `json:"active"`
	// State is systemd's word for it ("active (running)",
	// "inactive (dead)", "not loaded").
	State string `json:"state"`
	// PID is the service's main process, 0 when none.
	PID int `json:"pid,omitempty"`
	// Restarts counts restarts systemd made, -1 when unknown.
	Restarts int `json:"restarts"`
	// Enabled says whether it starts at login, "" when unknown.
	Enabled string `json:"enabled,omitempty"`
}

// Status inspects the service: the file against what install would write
// now for binary (the config file as installed), and the manager.
func (m *Manager) Status(ctx context.Context, binary string) (Report, error) {
	r := Report{Path: m.Path(), Logs: Logs, SystemUnit: m.SystemUnit(), EnvFile: m.EnvFile()}
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
		want, err := m.render(spec)
		switch {
		case err != nil:
			r.Differs = err.Error()
		case bytes.Equal(b, want):
			r.Current = true
		case !bytes.Contains(b, []byte(Marker)):
			r.Differs = "it was not written by `mcp-reconnect service install`"
		case mf != nil && mf.SHA256 != sha256Hex(b):
			r.Differs = "it was edited since install"
		case mf != nil && mf.Binary != binary:
			r.Differs = fmt.Sprintf("it runs %s, this is %s", mf.Binary, binary)
		default:
			r.Differs = "its settings are not what install would write now (the environment changed, or another version wrote it)"
		}
	}
	r.EnvFileState = envFileState(r.EnvFile)
	out, err := m.env.Run(ctx, []string{"systemctl", "--user", "show", UnitName, "--property=LoadState,ActiveState,SubState,MainPID,NRestarts,UnitFileState"})
	if err != nil {
		r.RunningError = fmt.Sprintf("systemctl --user show %s: %v%s", UnitName, err, indentOutput(out))
	} else {
		run := parseSystemdShow(out)
		r.Running = &run
	}
	return r, nil
}
