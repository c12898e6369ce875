package procview

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"
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

// Compare orders keys by directory, then name: -1, 0 or +1.
func (k Key) Compare(o Key) int {
	return cmp.Or(strings.Compare(k.Directory, o.Directory), strings.Compare(k.Name, o.Name))
}

// resolve resolves symbolic links the way the kernel reports a working
// directory (/tmp is /private/tmp on macOS), and says whether dir could
// be resolved; a path that cannot be is kept as it is.
func resolve(dir string) (path string, ok bool) {
	if p, err := filepath.EvalSymlinks(dir); err == nil {
		return p, true
	}
	return filepath.Clean(dir), false
}

// matcher finds the configured servers a process runs. OpenCode starts a
// local server by executing its command as configured, so its child is
// the command's program at first, and what a launcher makes of itself
// later (launchers.go): behind up to two words of an interpreter (a
// script's #! line), retitled (npm's "npm exec …"), or the program it
// exec'd into (env, uvx, bash), in the directory it moved to (cd, uv
// --directory). Each server's forms are computed once, in newMatcher;
// serving and runs only look words up: the form first, then the place.
type matcher struct {
	// forms maps a command form to the servers it may run, by the
	// place each is started in. Index 0 holds the commands as
	// configured, 1 the forms derived from launchers: a process that
	// runs a configured command as it is serves that server, even if
	// another one's launcher may exec into it.
	forms [2]map[string]*sites
	// places numbers the working directories servers are started in
	// (their physical paths, as the kernel reports a process's cwd):
	// a thousand directories configured alike share ten forms and a
	// thousand places, not ten thousand keys.
	places map[string]int32
	// servers are the configured servers, as SetServers was given them
	// (not copied); resolved holds the physical paths of their
	// directories, for the next matcher: a rebuild resolves only
	// directories new to it.
	servers  []LocalServer
	resolved map[string]resolved
}

// resolved is a directory's physical path, and whether it could be
// resolved.
type resolved struct {
	path string
	ok   bool
}

// sites lists the servers of one form by where they are started: at is
// sorted by place, then by the servers' order, and keys[i] is the server
// of at[i], so the servers started alike in one place are one run of
// keys.
type sites struct {
	at   []site
	keys []Key
}

// site is one server (an index in matcher.servers) started in a place.
type site struct{ place, server int32 }

// newMatcher indexes servers.
func newMatcher(servers []LocalServer) *matcher { return buildMatcher(servers, nil) }

// buildMatcher indexes servers; prev, when set, is the matcher they
// replace, whose resolved directories are taken as they are (a symbolic
// link changed while its directory stays configured is not seen).
func buildMatcher(servers []LocalServer, prev *matcher) *matcher {
	m := &matcher{servers: unique(servers), forms: [2]map[string]*sites{{}, {}}, places: map[string]int32{},
		resolved: map[string]resolved{}}
	var forms []form
	var key []byte
	for i, s := range m.servers {
		// Where OpenCode starts it: the configured cwd, resolved
		// against the directory, else the directory itself.
		dir := filepath.Clean(joinDir(s.Directory, s.Cwd))
		forms = appendForms(forms[:0], s.Command, "", 0)
		// The command as configured, where OpenCode starts it and where
		// its launcher moves (sh -c 'cd sub && …').
		key = argvKey(key[:0], s.Command)
		home := m.place(dir, prev)
		m.add(0, i, home, key)
		for _, f := range forms {
			place := home
			if f.dir != "" {
				place = m.place(joinDir(dir, f.dir), prev)
			}
			if f.self {
				m.add(0, i, place, key)
				continue
			}
			m.add(1, i, place, f.key)
		}
	}
	for _, tab := range m.forms {
		for _, s := range tab {
			slices.SortFunc(s.at, func(a, b site) int {
				return cmp.Or(cmp.Compare(a.place, b.place), cmp.Compare(a.server, b.server))
			})
			s.at = slices.Compact(s.at) // a form of one server in one place, once
			s.keys = make([]Key, len(s.at))
			for i, x := range s.at {
				s.keys[i] = m.servers[x.server].Key()
			}
		}
	}
	return m
}

// unique is servers without those that have no command or the key of
// an earlier one, copied only when there are such: the engine lists each
// server once, with its command, in key order.
func unique(servers []LocalServer) []LocalServer {
	ok := true
	for i := range servers {
		ok = ok && len(servers[i].Command) > 0 && (i == 0 || servers[i-1].Key().Compare(servers[i].Key()) < 0)
	}
	if ok {
		return servers
	}
	seen := map[Key]bool{}
	out := make([]LocalServer, 0, len(servers))
	for _, s := range servers {
		if len(s.Command) > 0 && !seen[s.Key()] {
			seen[s.Key()] = true
			out = append(out, s)
		}
	}
	return out
}

// place numbers the physical path of dir. A directory that could not be
// resolved is tried again by the next matcher: it may exist by then.
func (m *matcher) place(dir string, prev *matcher) int32 {
	r, ok := m.resolved[dir]
	if !ok {
		if prev != nil {
			r, ok = prev.resolved[dir]
		}
		if !ok || !r.ok {
			r.path, r.ok = resolve(dir)
		}
		m.resolved[dir] = r
	}
	p := r.path
	id, ok := m.places[p]
	if !ok {
		id = int32(len(m.places))
		m.places[p] = id
	}
	return id
}

// add indexes one form of server i in place.
func (m *matcher) add(tier, i int, place int32, key []byte) {
	s := m.forms[tier][string(key)]
	if s == nil {
		s = &sites{}
		m.forms[tier][string(key)] = s
	}
	s.at = append(s.at, site{place, int32(i)})
}

// in is the servers of s started in place.
func (s *sites) in(place int32) []Key {
	lo, ok := slices.BinarySearchFunc(s.at, place, func(x site, p int32) int { return cmp.Compare(x.place, p) })
	if !ok {
		return nil
	}
	hi := lo + 1
	for hi < len(s.at) && s.at[hi].place == place {
		hi++
	}
	return s.keys[lo:hi:hi]
}

// same reports whether servers are m's servers, unchanged.
func (m *matcher) same(servers []LocalServer) bool {
	return slices.EqualFunc(m.servers, servers, func(a, b LocalServer) bool {
		return a.Directory == b.Directory && a.Name == b.Name && a.Cwd == b.Cwd && slices.Equal(a.Command, b.Command)
	})
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
	if !ok || depth >= maxChain {
		return out
	}
	if l.dir != "" {
		dir = joinDir(dir, l.dir)
		if depth == 0 {
			out = append(out, form{dir: dir, self: true})
		}
	}
	for _, t := range l.titles {
		out = append(out, form{key: titleKey(nil, t), dir: dir})
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

// lookup finds the forms of argv, among the commands as configured
// first: as it is, behind one or two words of an interpreter, or as a
// title; found returns the servers of a form that count (nil: look on).
// The keys are built in one buffer: this runs for every new child.
func (m *matcher) lookup(argv []string, found func(*sites) []Key) []Key {
	var arr [256]byte
	b := arr[:0]
	for _, tab := range m.forms {
		for drop := 0; drop <= 2 && drop < len(argv); drop++ {
			b = argvKey(b[:0], argv[drop:])
			if s := tab[string(b)]; s != nil {
				if ks := found(s); len(ks) > 0 {
					return ks
				}
			}
		}
		if len(argv) == 1 {
			b = titleKey(b[:0], argv[0])
			if s := tab[string(b)]; s != nil {
				if ks := found(s); len(ks) > 0 {
					return ks
				}
			}
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
	place, ok := m.places[p.Cwd]
	if !ok {
		return nil
	}
	return m.lookup(p.Argv, func(s *sites) []Key { return s.in(place) })
}

// runs returns the servers whose command p runs, wherever it runs it, in
// the order they were configured.
func (m *matcher) runs(p Process) []Key {
	if len(p.Argv) == 0 {
		return nil
	}
	return m.lookup(p.Argv, m.everywhere)
}

// everywhere is the servers of s, wherever they are started, each once.
func (m *matcher) everywhere(s *sites) []Key {
	idx := make([]int32, 0, len(s.at))
	for _, x := range s.at {
		idx = append(idx, x.server)
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	out := make([]Key, 0, len(idx))
	for _, i := range idx {
		out = append(out, m.servers[i].Key())
	}
	return out
}
