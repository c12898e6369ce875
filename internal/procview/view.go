package procview

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// Child is a process OpenCode started, as the view saw it first.
type Child struct {
	// PID, Start and Birth identify it (see Process).
	PID   int
	Start time.Time
	Birth uint64
	// Parent is the OpenCode process it is a child of, and PGID its
	// process group.
	Parent, PGID int
	// Cwd is its working directory when it was first seen.
	Cwd string

	cmd *command
}

// Command is the child's command line with secrets masked (Display):
// safe to log and show. It is made on first use: masking costs more than
// the rest of a child's read, and most children are never shown.
func (c Child) Command() string { return c.cmd.String() }

// LogValue logs a child by pid, parent, start and masked command.
func (c Child) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("pid", c.PID), slog.Int("parent", c.Parent),
		slog.Time("start", c.Start), slog.String("command", c.Command()))
}

func childOf(p Process) Child {
	return Child{PID: p.PID, Start: p.Start, Birth: p.Birth, Parent: p.PPID, PGID: p.PGID, Cwd: p.Cwd, cmd: newCommand(p.Argv)}
}

// Ident is the child's identity, for the record.
func (c Child) Ident() Ident { return Ident{PID: c.PID, Birth: c.Birth, Start: c.Start, PGID: c.PGID} }

// command holds an argv behind a pointer, so that printing a Child or an
// Orphan with %v shows an address, never the raw words (fmt prints
// unexported fields, but not what a nested pointer points to).
type command struct {
	argv  []string
	once  sync.Once
	shown string
}

func newCommand(argv []string) *command { return &command{argv: argv} }

// String is Display(argv), made once.
func (c *command) String() string {
	if c == nil {
		return ""
	}
	c.once.Do(func() { c.shown = Display(c.argv) })
	return c.shown
}

// ident is a process's identity across scans.
type ident struct {
	pid   int
	birth uint64
}

func (c Child) ident() ident { return ident{c.PID, c.Birth} }

// Snapshot is what one scan saw under the watched OpenCode. It is never
// changed after Scan returns it.
type Snapshot struct {
	// At is when the scan ran.
	At time.Time
	// Gone says the watched OpenCode exited (or its pid now belongs to
	// another process): nothing else is then known.
	Gone bool
	// Servers holds the live children serving each configured server,
	// oldest first. A server with none is absent. Two or more mean
	// duplicates, except for servers configured alike (see Alike).
	Servers map[Key][]Child
	// Others are OpenCode's live children that run no configured
	// server in its place: language servers, commands the agent runs,
	// a server whose argv or cwd changed before the view first saw it.
	Others []Child

	live  map[ident]bool
	alike map[Key][]Key
	// gen numbers the view's snapshots: a scan that saw nothing new
	// returns the last snapshot again, with the same gen.
	gen uint64
}

// Child returns the live child serving k, the newest if several do.
func (s Snapshot) Child(k Key) (Child, bool) {
	cs := s.Servers[k]
	if len(cs) == 0 {
		return Child{}, false
	}
	return cs[len(cs)-1], true
}

// Alike lists the servers configured exactly like k (same command, same
// working directory), k included: a process cannot say which of them it
// serves, so their children are listed under each.
func (s Snapshot) Alike(k Key) []Key {
	if ks := s.alike[k]; len(ks) > 0 {
		return ks
	}
	return []Key{k}
}

// Duplicate is a server with more live children than it should have.
type Duplicate struct {
	// Keys is the server (more than one only for servers configured
	// alike, whose children are counted together).
	Keys []Key
	// Children are the live children, oldest first.
	Children []Child
}

// Duplicates lists the servers with more live children than servers
// configured alike, sorted by key.
func (s Snapshot) Duplicates() []Duplicate {
	var out []Duplicate
	seen := map[Key]bool{}
	for _, k := range sortedKeys(s.Servers) {
		if seen[k] {
			continue
		}
		ks := s.Alike(k)
		for _, a := range ks {
			seen[a] = true
		}
		if cs := s.Servers[k]; len(cs) > len(ks) {
			out = append(out, Duplicate{Keys: ks, Children: cs})
		}
	}
	return out
}

// changes calls fn with each child serving a server that exited from
// prev to next, then with each that started; nothing once OpenCode is gone
// (its children are not reported one by one). A child that lives on but
// serves another server after a config change is neither.
func changes(prev, next Snapshot, fn func(started bool, k Key, c Child)) {
	if next.Gone {
		return
	}
	for _, k := range sortedKeys(prev.Servers) {
		for _, c := range prev.Servers[k] {
			if !next.live[c.ident()] {
				fn(false, k, c)
			}
		}
	}
	for _, k := range sortedKeys(next.Servers) {
		for _, c := range next.Servers[k] {
			if !prev.live[c.ident()] {
				fn(true, k, c)
			}
		}
	}
}

func sortedKeys[V any](m map[Key]V) []Key { return slices.SortedFunc(maps.Keys(m), Key.Compare) }

// View follows the children of one OpenCode process across scans. A scan
// reads only the list of OpenCode's children and the processes it has not
// seen before, so an idle scan costs a few small reads however many
// children there are (see BENCHMARKS.md). Safe for concurrent use.
type View struct {
	table Table
	root  Process

	mu      sync.Mutex
	m       *matcher
	mgen    uint64 // bumped by SetServers
	changed bool   // servers changed since the last snapshot
	known   map[int]*known
	// dead are listed children found gone or a zombie: not read again
	// while the list holds them (OpenCode has not reaped them yet). The
	// value is the scan that last listed them.
	dead map[int]uint64
	// wrapped are the known children that are OpenCode itself (see
	// known.parent).
	wrapped map[int]bool
	// exited are known children an exit watcher saw end (Exited), and
	// when: the next scan drops them though OpenCode may not have reaped
	// them yet, and Run tells their exit with that time.
	exited map[ident]time.Time
	// scans counts the scans; a child listed by this one has seen ==
	// scans (no set of listed pids is built per scan).
	scans uint64
	last  *Snapshot
	// snaps counts the snapshots made (Snapshot.gen).
	snaps uint64

	// What Run keeps: the handler and the generation of its servers
	// the matcher has, the record, the wake-up of Look.
	h      Handler
	hgen   uint64
	record *Record
	look   chan struct{}
	// seen are the sightings the record holds: each process seen under
	// OpenCode, kept while it runs, so that no save (the last one least
	// of all) drops one an earlier save made.
	seen map[ident]Sighting
}

type known struct {
	p     Process
	child Child
	// seen is the last scan that listed it.
	seen uint64
	// keys are the servers it serves under matcher generation gen.
	keys []Key
	gen  uint64
	// parent marks an OpenCode process below the root (the native
	// binary under the npm package's node wrapper): its children are
	// OpenCode's too.
	parent bool
	// unsettled counts the scans left to read it again: its argv was
	// about to change when it was read (an exec in progress, npm's first
	// title "npm"), so it could not be matched yet.
	unsettled uint8
	// below is what runs its server below it (Run).
	below serverBelow
}

// maxRereads bounds how many scans read an unsettled child again.
const maxRereads = 3

// reread reads an unsettled child again; true when its argv changed.
func (v *View) reread(k *known) bool {
	k.unsettled--
	p, err := v.table.Read(k.p.PID)
	if err != nil || !p.Same(k.p) || p.Zombie || slices.Equal(p.Argv, k.p.Argv) {
		return false
	}
	if settled(p) {
		k.unsettled = 0
	}
	k.p, k.child, k.keys = p, childOf(p), nil
	return true
}

// argvOf is the argv of pid as the view read it: the root's, or a known
// process's.
func (v *View) argvOf(pid int) []string {
	if pid == v.root.PID {
		return v.root.Argv
	}
	if k, ok := v.known[pid]; ok {
		return k.p.Argv
	}
	return nil
}

// NewView starts a view of the OpenCode process pid. ErrGone when it does
// not exist.
func NewView(t Table, pid int) (*View, error) {
	root, err := t.Read(pid)
	if err != nil {
		return nil, err
	}
	if root.Zombie {
		return nil, fmt.Errorf("procview: pid %d has exited: %w", pid, ErrGone)
	}
	return &View{table: t, root: root, m: newMatcher(nil), known: map[int]*known{}, dead: map[int]uint64{}, wrapped: map[int]bool{}, exited: map[ident]time.Time{},
		look: make(chan struct{}, 1), seen: map[ident]Sighting{}}, nil
}

// SetServers replaces the configured local servers of every armed
// directory. Children already seen are assigned again without a read.
// The view keeps servers (it does not copy them): the caller must not
// change them afterwards. Servers equal to the current ones change
// nothing: the engine lists them again after each config read.
func (v *View) SetServers(servers []LocalServer) {
	v.mu.Lock()
	prev := v.m
	v.mu.Unlock()
	if prev.same(servers) {
		return
	}
	m := buildMatcher(servers, prev)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.m = m
	v.mgen++
	v.changed = true
}

// Scan reads OpenCode's children and returns what serves what, under
// the servers Run's handler lists now (or those SetServers gave).
func (v *View) Scan() (Snapshot, error) {
	v.sync()
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	if v.last != nil && v.last.Gone {
		return *v.last, nil
	}
	if r, err := v.table.Stat(v.root.PID); err != nil || !r.Same(v.root) || r.Zombie {
		if err != nil && !errors.Is(err, ErrGone) {
			return Snapshot{}, err
		}
		// The known children stay: the record's last save reads what
		// ran below each.
		v.dead, v.wrapped, v.exited = map[int]uint64{}, map[int]bool{}, map[ident]time.Time{}
		s := &Snapshot{At: now, Gone: true}
		v.last = s
		return *s, nil
	}

	parents := map[int]bool{v.root.PID: true}
	maps.Copy(parents, v.wrapped)
	v.scans++
	hits := 0
	added := false
	queue := []int{v.root.PID}
	for len(queue) > 0 {
		pp := queue[0]
		queue = queue[1:]
		kids, err := v.table.Children(pp)
		if err != nil {
			if pp == v.root.PID {
				return Snapshot{}, err
			}
			continue // a wrapped OpenCode that exited: its known children are checked below
		}
		for _, c := range kids {
			if k, ok := v.known[c]; ok {
				if k.seen != v.scans {
					k.seen = v.scans
					hits++
				}
				if k.unsettled > 0 && v.reread(k) {
					added = true
					if !k.parent && parents[pp] && IsOpenCode(k.p) {
						k.parent = true
						v.wrapped[c] = true
						parents[c] = true
						queue = append(queue, c)
					}
				}
				continue
			}
			if _, ok := v.dead[c]; ok {
				v.dead[c] = v.scans
				continue
			}
			p, err := v.table.Read(c)
			if err != nil || p.Zombie || p.PPID != pp {
				// It came and went between the listing and the read.
				v.dead[c] = v.scans
				continue
			}
			k := &known{p: p, child: childOf(p), seen: v.scans}
			// A child read between its fork and its exec is a copy of
			// its parent, argv and all: read it again, and take it for
			// nothing (an OpenCode least of all) until it has exec'd.
			copyOfParent := slices.Equal(p.Argv, v.argvOf(pp))
			if !settled(p) || copyOfParent {
				k.unsettled = maxRereads
			}
			// The npm package's node wrapper runs the native binary as
			// its child; that one starts the MCP servers. Wrappers may
			// nest (a script of the user's around npm's, npx): every
			// OpenCode below the root or below a wrapper is one more.
			k.parent = parents[pp] && !copyOfParent && IsOpenCode(p)
			v.known[c] = k
			hits++
			added = true
			if k.parent {
				v.wrapped[c] = true
				parents[c] = true
				queue = append(queue, c)
			}
		}
	}
	maps.DeleteFunc(v.dead, func(_ int, seen uint64) bool { return seen != v.scans })
	exited := false
	// An exit watcher's word beats the list: OpenCode reaps a dead child
	// a few milliseconds after it exits, and lists it until then.
	for id := range v.exited {
		if k, ok := v.known[id.pid]; ok && k.child.ident() == id {
			if k.seen == v.scans {
				hits--
			}
			k.seen = 0
		}
	}
	// When every known child was listed, none can have exited: no need
	// to walk them all.
	for pid, k := range v.known {
		if hits == len(v.known) {
			break
		}
		if k.seen == v.scans {
			continue
		}
		// The kernel's children list can miss a child while the tree
		// changes: only a process seen exiting (seen 0), or that is
		// gone, is another one or has another parent, has exited.
		if k.seen != 0 {
			p, err := v.table.Stat(pid)
			if err == nil && p.Same(k.p) && !p.Zombie && parents[p.PPID] {
				continue
			}
		}
		delete(v.known, pid)
		delete(v.wrapped, pid)
		exited = true
	}
	if !exited && !added && !v.changed && v.last != nil {
		s := *v.last
		s.At = now
		v.last = &s
		return s, nil
	}
	v.changed = false
	s := v.snapshot(now)
	v.last = s
	return *s, nil
}

// snapshot assigns every known child under the current servers.
func (v *View) snapshot(now time.Time) *Snapshot {
	v.snaps++
	s := &Snapshot{At: now, Servers: map[Key][]Child{},
		live: make(map[ident]bool, len(v.known)), alike: map[Key][]Key{}, gen: v.snaps}
	kids := slices.SortedFunc(maps.Values(v.known), func(a, b *known) int {
		return cmp.Or(cmp.Compare(a.p.Birth, b.p.Birth), a.p.PID-b.p.PID)
	})
	for _, k := range kids {
		s.live[k.child.ident()] = true
		if k.parent {
			continue
		}
		if k.gen != v.mgen || k.keys == nil {
			k.keys, k.gen = v.m.serving(k.p), v.mgen
			if k.keys == nil {
				k.keys = []Key{} // known to serve nothing
			}
		}
		keys := k.keys
		if len(keys) == 0 {
			s.Others = append(s.Others, k.child)
			continue
		}
		for _, key := range keys {
			s.Servers[key] = append(s.Servers[key], k.child)
			if len(keys) > 1 {
				s.alike[key] = keys
			}
		}
	}
	return s
}

// Exited tells the view that the process pid (with that birth) exited at
// at, as an exit watcher saw it: the next scan counts it gone even while
// OpenCode still lists it.
func (v *View) Exited(pid int, birth uint64, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.known[pid]; ok && k.p.Birth == birth {
		v.exited[ident{pid, birth}] = at
	}
}

// Successor reports whether a child born after birth serves k (or a
// server configured alike), read from the process table now: a fresh
// scan of OpenCode's children, under the handler's servers of now.
func (v *View) Successor(dir, name string, birth uint64) bool {
	s, err := v.Scan()
	return err == nil && !s.Gone && slices.ContainsFunc(s.Servers[Key{dir, name}], func(c Child) bool { return c.Birth > birth })
}

// Clock reads the clock births count in (Table.Now).
func (v *View) Clock() uint64 { return v.table.Now() }
