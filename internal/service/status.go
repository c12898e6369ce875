package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// Report is what Status found.
type Report struct {
	// Platform is "systemd"; Path the unit.
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
}

// Status inspects the service: the file against what install would write
// now for binary (the config file as installed), and the manager.
func (m *Manager) Status(ctx context.Context, binary string) (Report, error) {
	r := Report{Platform: platform, Path: m.p.path(), Logs: m.p.logs()}
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
	r.EnvFile = m.EnvFile()
	r.EnvFileState = envFileState(r.EnvFile)
	run, err := m.p.running(ctx, m.env.Runner)
	if err != nil {
		r.RunningError = err.Error()
	} else {
		r.Running = &run
	}
	return r, nil
}

func hashIs(b []byte, mf *Manifest, path string) bool {
	i := slices.IndexFunc(mf.Files, func(f ManifestFile) bool { return f.Path == path })
	return i >= 0 && mf.Files[i].SHA256 == sha256Hex(b)
}
