package procview

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The view's own loop (Run): where OpenCode itself does not say (before
// 1.15 a dead stdio server stays "connected"), the exit of the child
// serving a local server is told to the handler (ChildExited) the moment
// it happens: an exit watcher (Exits: a pidfd per child) reports it in
// milliseconds, and the handler asks the view afresh, when it decides,
// whether OpenCode started a successor itself (Successor). Scans only
// find new children: when something may have changed (Look), and every
// slowScanEvery. Where no exit watcher works, scans find exits too, every
// scanEvery. Every MCP process seen goes into the record: the evidence
// that proves it an orphan to doctor once this OpenCode is gone.

// scanEvery is the scan period without an exit watcher (stretched when a
// scan is slow: scanPeriod).
const scanEvery = 2 * time.Second

// scanPeriod is how long to wait after a scan that took took, for a
// period of every: stretched to 1,000 times the scan (at most a minute),
// so a view never costs more than about 0.1 % of a core.
func scanPeriod(every, took time.Duration) time.Duration {
	return max(every, min(1000*took, time.Minute))
}

// slowScanEvery is the scan period with an exit watcher: scans only find
// children started without any event (Look covers the rest).
const slowScanEvery = 30 * time.Second

// lookGap is the least time between two scans that Look asks for: a
// burst of events costs one scan.
const lookGap = 200 * time.Millisecond

// recordEvery bounds how often the record is rewritten.
const recordEvery = 2 * time.Second

// freshFor is how old a scan Status may show: older, it scans first
// (right after start, or between slow scans).
const freshFor = time.Second

// maxBelowTries bounds how often a child's server process is looked for
// (a launcher still installing has none yet).
const maxBelowTries = 5

// Handler is what the view serves: the engine of the OpenCode it
// watches.
type Handler interface {
	// LocalServers lists the configured local servers in key order, and
	// a generation; none (changed false) while the generation is since.
	LocalServers(since uint64) (gen uint64, servers []LocalServer, changed bool)
	// ChildExited: the child born at birth that served name in dir was
	// seen gone at at.
	ChildExited(dir, name string, birth uint64, at time.Time)
	// ChildStarted: a child started by at serves name in dir.
	ChildStarted(dir, name string, at time.Time)
}

// Options are what Run uses besides the view's table.
type Options struct {
	// Exits makes the exit watcher (NewExits for this machine's table;
	// nil: scans alone, as for a recorded table).
	Exits func() (*Exits, error)
	// Record keeps what was seen, for the orphans' evidence (nil: none).
	Record *Record
	// Log gets debug lines (nil: none).
	Log *slog.Logger
}

// serverBelow is what runs a child's server.
type serverBelow struct {
	proc        Process
	inContainer bool
	known       bool
	tries       int
}

// Look says OpenCode's children may have changed (a connect returned, a
// status changed, a config was read): Run scans soon. It never blocks.
func (v *View) Look() {
	select {
	case v.look <- struct{}{}:
	default:
	}
}

// sync gives the view the handler's local servers when they changed.
func (v *View) sync() {
	v.mu.Lock()
	h, since := v.h, v.hgen
	v.mu.Unlock()
	if h == nil {
		return
	}
	if g, servers, changed := h.LocalServers(since); changed {
		v.SetServers(servers)
		v.mu.Lock()
		v.hgen = g
		v.mu.Unlock()
	}
}

// launcher is how the local server k runs, read from its command.
func (v *View) launcher(k Key) Launcher {
	v.mu.Lock()
	servers := v.m.servers
	v.mu.Unlock()
	if i, ok := slices.BinarySearchFunc(servers, k, func(s LocalServer, k Key) int { return s.Key().Compare(k) }); ok {
		return LauncherOf(servers[i].Command)
	}
	return Launcher{}
}

// Run follows OpenCode's children until OpenCode exits (nil) or ctx
// ends: scans, the exit watcher, the record, and h told of each exit and
// start (h may be nil: nothing is told).
func (v *View) Run(ctx context.Context, h Handler, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v.mu.Lock()
	v.h, v.hgen, v.record = h, ^uint64(0), o.Record
	v.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	var exits *Exits
	var wg sync.WaitGroup
	var exitsEnded atomic.Bool // the watcher ended before Run: scans find exits again
	if o.Exits != nil {
		var err error
		if exits, err = o.Exits(); err != nil {
			log.Debug("no exit watcher; scanning for exits", "err", err)
		} else {
			wg.Go(func() {
				exits.Run(ctx, func(x Exit) {
					v.Exited(x.PID, x.Birth, x.At)
					v.Look()
				})
				exitsEnded.Store(true)
				v.Look()
			})
			// OpenCode's own end, the moment it comes: the record says when.
			if err := exits.Add(v.table, v.root); err != nil {
				log.Debug("cannot watch opencode for its exit; scanning for it", "pid", v.root.PID, "err", err)
			}
		}
	}
	log.Debug("watching opencode's MCP processes", "pid", v.root.PID, "exit_watcher", exits != nil)
	defer func() {
		cancel()
		wg.Wait()
		if exits != nil {
			_ = exits.Close()
		}
	}()
	var prev Snapshot
	partial := false // some child could not be watched: scan for exits
	var saved, lastScan time.Time
	dirty := true // the record names this OpenCode from its first scan
	for {
		start := time.Now()
		s, err := v.Scan()
		lastScan = time.Now()
		if err == nil {
			changes(prev, s, func(started bool, k Key, c Child) {
				if started {
					if h != nil {
						h.ChildStarted(k.Directory, k.Name, s.At)
					}
					return
				}
				v.mu.Lock()
				at := cmp.Or(v.exited[c.ident()], s.At) // the exit watcher's time, when it saw it (never zero)
				v.mu.Unlock()
				log.Debug("MCP server process exited", "directory", k.Directory, "server", k.Name, "child", c)
				// Whether a child started since serves it (OpenCode
				// started a new one, an older duplicate was ended) is
				// the handler's question, asked when it decides
				// (Successor); an older one left running is none:
				// OpenCode talks to its newest.
				if h != nil {
					h.ChildExited(k.Directory, k.Name, c.Birth, at)
				}
			})
			// A new snapshot (every exit or start, and a child OpenCode
			// started for no armed server yet, its config not read) is
			// recorded, and its children watched.
			if s.gen != prev.gen {
				dirty = true
				if exits != nil {
					partial = v.watchExits(exits, s, log) || partial
				}
			}
			if s.Gone && !prev.At.IsZero() {
				// What proves its orphans: the last children seen under
				// it (prev is never a Gone snapshot), and when it ended.
				v.save(prev, v.table.Now(), log)
			}
			// The exits s took (and those of OpenCode's other children,
			// which changes does not report).
			v.mu.Lock()
			maps.DeleteFunc(v.exited, func(id ident, _ time.Time) bool { return !s.live[id] })
			v.mu.Unlock()
			if s.Gone {
				return nil // OpenCode exited: find the next one
			}
			prev = s
			if dirty && time.Since(saved) >= recordEvery {
				dirty, saved = !v.save(s, 0, log), time.Now() // saved: when the save ended
			}
		}
		every := scanPeriod(scanEvery, lastScan.Sub(start))
		if exits != nil && !partial && !exitsEnded.Load() {
			every = slowScanEvery
		}
		if dirty {
			every = min(every, max(time.Until(saved.Add(recordEvery)), lookGap))
		}
		select {
		case <-ctx.Done():
			// run ends the daemon as soon as OpenCode exits: the record
			// must say so all the same.
			if s, err := v.Scan(); err == nil && s.Gone && !prev.At.IsZero() {
				v.save(prev, v.table.Now(), log)
			}
			return nil
		case <-v.look:
			if wait := lookGap - time.Since(lastScan); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
		case <-time.After(every):
		}
	}
}

// watchExits hands the exit watcher every live child of s (it ignores
// those it watches, and forgets those that exited); it reports whether
// one could not be watched (then scans must find its exit). Only
// OpenCode's children: the end of a process below a launcher that runs
// on (a shell with a next command, a build step before the server)
// closes no pipe of OpenCode's, and nothing tells a build step from a
// server there; a crash is the child's subtree ending, which its own
// exit shows.
func (v *View) watchExits(exits *Exits, s Snapshot, log *slog.Logger) (partial bool) {
	for _, cs := range append(slices.Collect(maps.Values(s.Servers)), s.Others) {
		for _, c := range cs {
			if err := exits.Add(v.table, Process{PID: c.PID, Birth: c.Birth}); err != nil {
				if !partial {
					log.Debug("cannot watch an MCP process for its exit; scanning for it", "pid", c.PID, "err", err)
				}
				partial = true
			}
		}
	}
	return partial
}

// serverBelow is the process below child c that runs its server: looked
// for (look) until found, then kept with the child while it runs.
func (v *View) serverBelow(c Child, look bool) serverBelow {
	v.mu.Lock()
	k := v.known[c.PID]
	if k == nil || k.child.ident() != c.ident() {
		k = &known{} // gone since: nothing kept
	}
	b := k.below
	v.mu.Unlock()
	if !look {
		return b
	}
	if b.known && !IdentOf(b.proc).Alive(v.table) {
		// A step that ended (a build before the server, a shell's
		// first command): what runs below the launcher now is another.
		b = serverBelow{}
	}
	if b.known || b.tries >= maxBelowTries {
		return b
	}
	proc, inContainer, err := ServerProcess(v.table, Process{PID: c.PID, Birth: c.Birth})
	b.tries++
	if err == nil {
		b.proc, b.inContainer, b.known = proc, inContainer, true
	}
	v.mu.Lock()
	k.below = b
	v.mu.Unlock()
	return b
}

// save writes the record of the OpenCode watched: its identity, and each
// process seen under it that still runs (each child serving a server, the
// process below a launcher that runs the server, OpenCode's other
// children), with the OpenCode process it is a child of, and the boot
// they run on. ended, when set, is the table's clock when OpenCode was
// seen gone (s is then the last snapshot of it alive, and what ran below
// each launcher is taken as last seen: a launcher ended by a signal can
// leave its server). complete is false while a launcher's server has not
// been found yet (save again later).
func (v *View) save(s Snapshot, ended uint64, log *slog.Logger) (complete bool) {
	if v.record == nil {
		return true
	}
	complete = true
	root := v.root
	rec := Sightings{OpenCode: IdentOf(root), At: s.At, Boot: v.table.BootID(), End: ended}
	if root.PGID == os.Getpid() {
		// run: the wrapper leads OpenCode's group (the terminal's job),
		// and this process is the wrapper.
		if self, err := v.table.Stat(os.Getpid()); err == nil && self.PGID == self.PID {
			rec.Leader = IdentOf(self)
		}
	}
	// A child's parent is the root or a wrapped OpenCode the view knows
	// (kept while the record's last save reads them).
	parentOf := func(pid int) Ident {
		if pid == root.PID {
			return IdentOf(root)
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		if k, ok := v.known[pid]; ok && k.parent {
			return IdentOf(k.p)
		}
		return Ident{}
	}
	var found []Sighting
	for k, cs := range s.Servers {
		l := v.launcher(k)
		for _, c := range cs {
			parent := parentOf(c.Parent)
			found = append(found, Sighting{Ident: c.Ident(), Parent: parent, Directory: k.Directory, Server: k.Name})
			if l.Name == "" || l.InContainer {
				continue
			}
			// The server below a launcher too: a launcher ended by a
			// signal can leave it (npm's node survives npm's SIGKILL).
			b := v.serverBelow(c, ended == 0)
			complete = complete && (b.known || b.tries >= maxBelowTries)
			if b.known && b.proc.PID != c.PID && !b.inContainer {
				found = append(found, Sighting{Ident: IdentOf(b.proc), Parent: parent, Directory: k.Directory, Server: k.Name})
			}
		}
	}
	// OpenCode's other children (a server of a directory no daemon
	// armed, a language server, a command): seen under it, though which
	// server they run is not known here; Orphans matches their command.
	for _, c := range s.Others {
		found = append(found, Sighting{Ident: c.Ident(), Parent: parentOf(c.Parent)})
	}
	v.mu.Lock()
	for _, x := range found {
		if id := (ident{x.PID, x.Birth}); v.seen[id].Server == "" { // unseen, or seen serving none
			v.seen[id] = x
		}
	}
	// One that ended proves nothing any more.
	maps.DeleteFunc(v.seen, func(_ ident, x Sighting) bool { return !x.Alive(v.table) })
	rec.Seen = slices.Collect(maps.Values(v.seen))
	v.mu.Unlock()
	slices.SortFunc(rec.Seen, func(a, b Sighting) int { return a.PID - b.PID })
	if err := v.record.Save(rec); err != nil {
		log.Debug("could not record the MCP processes", "err", err)
	} else {
		log.Debug("recorded opencode's MCP processes", "pid", root.PID, "processes", len(rec.Seen), "record", v.record.Dir)
	}
	return complete
}

// Status is what status shows of a local OpenCode's MCP processes (it
// runs on this machine as this user): its pid, the children serving each
// armed directory's local servers, and duplicates. Commands are masked
// (no environment, no header or token values).
type Status struct {
	// OpenCodePID is the OpenCode process whose children are watched.
	OpenCodePID int `json:"opencode_pid"`
	// Children counts the live MCP children matched to a server.
	Children int `json:"children"`
	// Servers are the processes serving each local server: the one
	// OpenCode started and, below it, the one that runs the server.
	Servers []ServerRun `json:"servers,omitempty"`
	// Duplicates are servers of one directory with two or more live
	// children.
	Duplicates []ProcessGroup `json:"duplicates,omitempty"`
}

// ServerRun is what runs one local server of one directory.
type ServerRun struct {
	Directory string `json:"directory"`
	Server    string `json:"server"`
	// PID and Command are the process OpenCode started for it: its
	// launcher (npx, uvx, a shell, docker run) or the server itself.
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// Launcher names the launcher ("npx", "uvx", "sh -c", "docker
	// run"); "" when OpenCode runs the server itself.
	Launcher string `json:"launcher,omitempty"`
	// ServerPID and ServerCommand are the process below the launcher
	// that runs the server, once seen (0 and "" before, or when the
	// launcher is the server).
	ServerPID     int    `json:"server_pid,omitempty"`
	ServerCommand string `json:"server_command,omitempty"`
	// InContainer: the server runs in a container (docker run, podman
	// run), which this machine's process table does not show.
	InContainer bool `json:"in_container,omitempty"`
	// LauncherRunsOn: the launcher can outlive its server (a shell with
	// more than one command, a script): a crash of the server below it
	// closes no pipe of OpenCode's, and is not seen until the launcher
	// ends.
	LauncherRunsOn bool `json:"launcher_runs_on,omitempty"`
}

// ProcessGroup is one server of one directory with its live children.
type ProcessGroup struct {
	Directory string `json:"directory"`
	Server    string `json:"server"`
	PIDs      []int  `json:"pids"`
	Command   string `json:"command"`
}

// Status is what status shows; nil once OpenCode is gone. A scan older
// than freshFor is made again first: right after start, or between slow
// scans, the last one may predate a child.
func (v *View) Status() *Status {
	v.mu.Lock()
	last := v.last
	v.mu.Unlock()
	if last == nil || time.Since(last.At) > freshFor {
		if s, err := v.Scan(); err == nil {
			last = &s
			v.Look() // Run diffs it too
		}
	}
	if last == nil || last.Gone {
		return nil
	}
	out := &Status{OpenCodePID: v.root.PID}
	for _, k := range sortedKeys(last.Servers) {
		c, _ := last.Child(k)
		l := v.launcher(k)
		sp := ServerRun{Directory: k.Directory, Server: k.Name, PID: c.PID, Command: c.Command(), Launcher: l.Name, InContainer: l.InContainer, LauncherRunsOn: l.Name != "" && !l.ExitsWithServer}
		if l.Name != "" && !l.InContainer {
			if b := v.serverBelow(c, true); b.known && b.proc.PID != c.PID {
				sp.ServerPID, sp.ServerCommand = b.proc.PID, Display(b.proc.Argv)
			}
		}
		out.Servers = append(out.Servers, sp)
		out.Children += len(last.Servers[k])
	}
	for _, d := range last.Duplicates() {
		for _, k := range d.Keys {
			g := ProcessGroup{Directory: k.Directory, Server: k.Name}
			for _, c := range d.Children {
				g.PIDs = append(g.PIDs, c.PID)
				g.Command = c.Command()
			}
			out.Duplicates = append(out.Duplicates, g)
		}
	}
	return out
}
