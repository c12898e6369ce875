package procview

import (
	"path/filepath"
	"slices"
	"strings"
)

// Server is one configured local (stdio) MCP server of an armed
// directory, as OpenCode's config for that directory names it.
type Server struct {
	// Directory is the OpenCode instance directory.
	Directory string
	// Name is the server's name in the config.
	Name string
	// Command is the configured command and its arguments.
	Command []string
	// Cwd is the configured working directory, "" for none; a relative
	// one is resolved against Directory, as OpenCode does.
	Cwd string
}

// Key names one server of one directory.
type Key struct {
	Directory, Name string
}

// Key returns s's key.
func (s Server) Key() Key { return Key{s.Directory, s.Name} }

// WorkDir is the directory OpenCode starts s in: the configured cwd,
// resolved against the directory, else the directory itself.
func (s Server) WorkDir() string {
	switch {
	case s.Cwd == "":
		return filepath.Clean(s.Directory)
	case filepath.IsAbs(s.Cwd):
		return filepath.Clean(s.Cwd)
	default:
		return filepath.Join(s.Directory, s.Cwd)
	}
}

// physical resolves symbolic links the way the kernel reports a working
// directory (/tmp is /private/tmp on macOS); a path that cannot be
// resolved is kept as it is.
func physical(dir string) string {
	if p, err := filepath.EvalSymlinks(dir); err == nil {
		return p
	}
	return filepath.Clean(dir)
}

// matcher finds the configured servers a process runs. OpenCode starts a
// local server by executing its command as configured, so the child's
// argv is the command; when the command is a script the kernel puts its
// interpreter in front ("#!/usr/bin/env node" makes ["npx", "-y", "x"]
// run as ["node", "/usr/bin/npx", "-y", "x"]), so up to two leading
// words may be an interpreter's, and the program is compared by its last
// path element.
type matcher struct {
	// byCommand maps a command's signature to the servers configured
	// with it, whatever their directory.
	byCommand map[string][]Key
	// byPlace maps a working directory and a command signature to the
	// servers started there with it: usually one.
	byPlace map[string][]Key
	servers map[Key]Server
}

func newMatcher(servers []Server) *matcher {
	m := &matcher{byCommand: map[string][]Key{}, byPlace: map[string][]Key{}, servers: map[Key]Server{}}
	for _, s := range servers {
		if len(s.Command) == 0 {
			continue
		}
		k := s.Key()
		if _, dup := m.servers[k]; dup {
			continue
		}
		m.servers[k] = s
		sig := signature(s.Command)
		m.byCommand[sig] = append(m.byCommand[sig], k)
		place := physical(s.WorkDir()) + "\x00" + sig
		m.byPlace[place] = append(m.byPlace[place], k)
	}
	return m
}

// signature is a command as the matcher compares it.
func signature(cmd []string) string {
	return filepath.Base(cmd[0]) + "\x00" + strings.Join(cmd[1:], "\x00")
}

// candidates are the ways argv may hold a configured command: as it is,
// or behind one or two words of an interpreter.
func candidates(argv []string) []string {
	var out []string
	for drop := 0; drop <= 2 && drop < len(argv); drop++ {
		out = append(out, signature(argv[drop:]))
	}
	return out
}

// serving returns the servers p runs in its working directory: one, or
// several configured alike (the same command in the same place), which
// no process view can tell apart.
func (m *matcher) serving(p Process) []Key {
	if len(p.Argv) == 0 || p.Cwd == "" {
		return nil
	}
	for _, sig := range candidates(p.Argv) {
		if ks := m.byPlace[p.Cwd+"\x00"+sig]; len(ks) > 0 {
			return ks
		}
	}
	return nil
}

// runs returns the servers whose command p runs, wherever it runs it.
func (m *matcher) runs(p Process) []Key {
	if len(p.Argv) == 0 {
		return nil
	}
	for _, sig := range candidates(p.Argv) {
		if ks := m.byCommand[sig]; len(ks) > 0 {
			return slices.Clone(ks)
		}
	}
	return nil
}
