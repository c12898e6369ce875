package procview

import (
	"path/filepath"
	"slices"
)

// LocalServer is one configured local (stdio) MCP server of an armed
// directory, as OpenCode's config for that directory names it.
type LocalServer struct {
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
func (s LocalServer) Key() Key { return Key{s.Directory, s.Name} }

// WorkDir is the directory OpenCode starts s in: the configured cwd,
// resolved against the directory, else the directory itself.
func (s LocalServer) WorkDir() string {
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
// local server by executing its command as configured, so its child is
// the command's program at first, and what a launcher makes of itself
// later (launchers.go): behind up to two words of an interpreter (a
// script's #! line), retitled (npm's "npm exec …"), or the program it
// exec'd into (env, uvx, bash), in the directory it moved to (cd, uv
// --directory). Each server's forms are computed once, in newMatcher;
// serving and runs only look words up.
type matcher struct {
	// byCommand maps a command form to the servers it may run,
	// whatever their directory; byPlace maps a working directory and a
	// form to the servers started there: usually one. Index 0 holds the
	// commands as configured, 1 the forms derived from launchers: a
	// process that runs a configured command as it is serves that
	// server, even if another one's launcher may exec into it.
	byCommand [2]map[string][]Key
	byPlace   [2]map[string][]Key
	servers   map[Key]LocalServer
	// key and place are newMatcher's scratch buffers: it builds 10,000
	// keys at a time.
	key, place []byte
}

func newMatcher(servers []LocalServer) *matcher {
	m := &matcher{servers: map[Key]LocalServer{}}
	for i := range m.byCommand {
		m.byCommand[i], m.byPlace[i] = map[string][]Key{}, map[string][]Key{}
	}
	var forms []form
	for _, s := range servers {
		if len(s.Command) == 0 {
			continue
		}
		k := s.Key()
		if _, dup := m.servers[k]; dup {
			continue
		}
		m.servers[k] = s
		dir := s.WorkDir()
		forms = appendForms(forms[:0], s.Command, "", 0)
		// The command as configured, where OpenCode starts it and where
		// its launcher moves (sh -c 'cd sub && …').
		m.key = argvKey(m.key[:0], s.Command)
		home := physical(dir)
		m.add(0, k, home, m.key)
		for _, f := range forms {
			place := home
			if f.dir != "" {
				place = physical(joinDir(dir, f.dir))
			}
			if f.self {
				m.add(0, k, place, m.key)
				continue
			}
			m.add(1, k, place, f.key)
		}
	}
	m.key, m.place = nil, nil
	return m
}

// add indexes one form of server k in place, once.
func (m *matcher) add(tier int, k Key, place string, key []byte) {
	if ks := m.byCommand[tier][string(key)]; len(ks) == 0 || ks[len(ks)-1] != k {
		m.byCommand[tier][string(key)] = append(ks, k)
	}
	m.place = append(append(append(m.place[:0], place...), 0), key...)
	if ks := m.byPlace[tier][string(m.place)]; len(ks) == 0 || ks[len(ks)-1] != k {
		m.byPlace[tier][string(m.place)] = append(ks, k)
	}
}

// joinDir is dir moved to rel ("" stays).
func joinDir(dir, rel string) string {
	switch {
	case rel == "":
		return dir
	case filepath.IsAbs(rel):
		return filepath.Clean(rel)
	}
	return filepath.Join(dir, rel)
}

// form is one shape a configured command's process takes besides the
// command itself.
type form struct {
	// key is an argvKey or a titleKey.
	key []byte
	// dir is where the process is then, relative to the configured
	// working directory.
	dir string
	// self: the configured command itself, in dir.
	self bool
}

// appendForms appends the forms of cmd's launcher, and of what it execs
// into, chained.
func appendForms(out []form, cmd []string, dir string, depth int) []form {
	l, ok := parseLaunch(cmd)
	if !ok || depth >= maxChain || l.dirUnknown {
		return out
	}
	if l.dir != "" {
		dir = joinDir(dir, l.dir)
		if depth == 0 {
			out = append(out, form{dir: dir, self: true})
		}
	}
	if l.title != "" {
		out = append(out, form{key: titleKey(nil, l.title), dir: dir})
	}
	if l.next != nil {
		out = append(out, form{key: argvKey(nil, l.next), dir: dir})
		out = appendForms(out, l.next, dir, depth+1)
	}
	return out
}

// argvKey appends the key of an argv: the program's last path element
// and the arguments, NUL-separated.
func argvKey(b []byte, argv []string) []byte {
	b = append(b, filepath.Base(argv[0])...)
	for _, a := range argv[1:] {
		b = append(b, 0)
		b = append(b, a...)
	}
	return append(b, 0)
}

// titleKey appends the key of a process title (one word).
func titleKey(b []byte, title string) []byte {
	b = append(b, 1)
	return append(b, title...)
}

// lookup finds argv's servers in tab under prefix: as it is, behind one
// or two words of an interpreter, or as a title. The keys are built in
// one buffer: this runs for every new child.
func lookup(tab map[string][]Key, prefix string, argv []string) []Key {
	var arr [256]byte
	b := append(arr[:0], prefix...)
	n := len(b)
	for drop := 0; drop <= 2 && drop < len(argv); drop++ {
		b = argvKey(b[:n], argv[drop:])
		if ks := tab[string(b)]; len(ks) > 0 {
			return ks
		}
	}
	if len(argv) == 1 {
		b = titleKey(b[:n], argv[0])
		if ks := tab[string(b)]; len(ks) > 0 {
			return ks
		}
	}
	return nil
}

// serving returns the servers p runs in its working directory: one, or
// several configured alike (the same command in the same place), which
// no process view can tell apart.
func (m *matcher) serving(p Process) []Key {
	if len(p.Argv) == 0 || p.Cwd == "" {
		return nil
	}
	prefix := p.Cwd + "\x00"
	for tier := range m.byPlace {
		if ks := lookup(m.byPlace[tier], prefix, p.Argv); ks != nil {
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
	for tier := range m.byCommand {
		if ks := lookup(m.byCommand[tier], "", p.Argv); ks != nil {
			return slices.Clone(ks)
		}
	}
	return nil
}
