package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// The MCP process view of a local OpenCode. When OpenCode runs on this
// machine as this user (always under run: it is the wrapper's child;
// under watch when the process listening on its loopback port, or its
// 2.x pid, is this user's), the daemon follows its MCP children: the
// child OpenCode started for each armed directory's local server (its
// launcher: npx, uvx, a shell, the server itself) and what runs below
// it. Where OpenCode itself does not say (before 1.15 a dead stdio
// server stays "connected"), the exit of that child is told to the
// engine (ChildExited) the moment it happens: an exit watcher
// (procview.Exits: a pidfd per child on Linux, kqueue on macOS) reports
// it in milliseconds, and the engine asks the process table afresh,
// when it decides, whether OpenCode started a successor itself
// (Successor). Scans only find new children: when OpenCode's events or
// the engine's own reads and connects say something changed (Look), and
// every slowScanEvery. Where no exit watcher works, scans find exits
// too, every scanEvery.
//
// Every MCP process seen under a live OpenCode goes into the record
// (procview.Record): the evidence that proves it an orphan to doctor,
// once that OpenCode is gone.

// scanEvery is the scan period without an exit watcher (procview
// stretches it when a scan is slow: BENCHMARKS.md).
const scanEvery = 2 * time.Second

// slowScanEvery is the scan period with an exit watcher: scans only find
// children started without any event (Look covers the rest).
const slowScanEvery = 30 * time.Second

// lookGap is the least time between two scans that Look asks for: a
// burst of events costs one scan.
const lookGap = 200 * time.Millisecond

// recordEvery bounds how often the record is rewritten.
const recordEvery = 2 * time.Second

// freshFor is how old a scan status may show: older, status scans first
// (right after start, or between slow scans).
const freshFor = time.Second

// procWatch is one watched server's process view.
type procWatch struct {
	eng    *reconnect.Engine
	client *opencode.Server
	// pid, when set, is the OpenCode process (run's child).
	pid int
	log *slog.Logger
	// again is signalled when the server may now be another process.
	again chan struct{}
	// look is signalled when OpenCode's children may have changed.
	look chan struct{}
	// newExits makes the exit watcher (procview.NewExits for this
	// machine's table; nil: scans alone, as for a recorded table).
	newExits func() (*procview.Exits, error)
	// record keeps what was seen, for the orphans' evidence (nil: none).
	record *procview.Record
	// clock is the table the last watch reads births from (Clock).
	clock atomic.Pointer[procview.Table]

	mu      sync.Mutex
	table   procview.Table
	view    *procview.View // the OpenCode process watched now; nil when none
	root    int
	gen     uint64 // the engine's LocalServers generation the view has
	last    procview.Snapshot
	servers []procview.LocalServer // the engine's local servers in key order: the one copy, the view's too
	// exitAt is when the exit watcher saw a child end, until the scan
	// that reports it.
	exitAt map[int]time.Time
	// launchers caches how the servers asked about run (launcher), until
	// servers changes: only servers with a child are asked about.
	launchers map[procview.Key]procview.Launcher
	// below caches, per child, the process below it that runs its
	// server (procview.ServerProcess), while that process runs.
	below map[ident]serverBelow
	// seen are the sightings of the OpenCode watched now that the record
	// holds: each process seen under it, kept while it runs, so that no
	// save (the last one least of all) drops one an earlier save made.
	seen map[ident]procview.Sighting
}

// ident is a process's identity in the watch's maps.
type ident struct {
	pid   int
	birth uint64
}

// serverBelow is what runs a child's server.
type serverBelow struct {
	proc        procview.Process
	inContainer bool
	known       bool
	tries       int
}

func newProcWatch(eng *reconnect.Engine, client *opencode.Server, pid int, log *slog.Logger) *procWatch {
	p := &procWatch{eng: eng, client: client, pid: pid, log: log, again: make(chan struct{}, 1), look: make(chan struct{}, 1),
		gen: ^uint64(0), exitAt: map[int]time.Time{}, launchers: map[procview.Key]procview.Launcher{},
		below: map[ident]serverBelow{}, seen: map[ident]procview.Sighting{}}
	if eng != nil {
		eng.SetProcessView(p)
	}
	return p
}

// where names the server in log lines.
func (p *procWatch) where() string {
	if p.client == nil {
		return ""
	}
	return p.client.URL()
}

// replaced tells the watch that OpenCode may be another process now.
func (p *procWatch) replaced() { signal(p.again) }

// Look implements reconnect.ProcessView: OpenCode's children may have
// changed (a connect returned, a status changed, a config was read).
func (p *procWatch) Look() { signal(p.look) }

// signal wakes the reader of ch, unless a wake-up is pending already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Successor implements reconnect.ProcessView from a fresh scan.
func (p *procWatch) Successor(dir, name string, birth uint64) bool {
	p.mu.Lock()
	v := p.view
	p.mu.Unlock()
	if v == nil {
		return false
	}
	p.syncServers(v)
	return v.Successor(procview.Key{Directory: dir, Name: name}, birth)
}

// Clock implements reconnect.ProcessView: the clock of the table the
// children's births were read from (0 before any was watched: then no
// child is known to be older than a connect). It takes no lock: the
// engine asks under its own.
func (p *procWatch) Clock() uint64 {
	tab := p.clock.Load()
	if tab == nil {
		return 0
	}
	return (*tab).Now()
}

// run watches until ctx ends: finds OpenCode's process, watches its
// children until it exits or is replaced, and looks again.
func (p *procWatch) run(ctx context.Context) {
	tab, err := procview.System()
	if err != nil {
		p.log.Debug("no process view", "err", err)
		return
	}
	p.mu.Lock()
	p.table = tab
	p.mu.Unlock()
	p.newExits = procview.NewExits
	if rec, err := procview.DefaultRecord(); err == nil {
		p.record = &rec
		if all, err := rec.Load(); err == nil {
			rec.Prune(tab, all)
		}
	}
	for ctx.Err() == nil {
		pid, err := p.find(tab)
		if err == nil {
			err = p.watch(ctx, tab, pid)
		}
		// Look again when OpenCode may be another process, or a while
		// later: never in a loop (run's child that exited stays the same
		// pid until the wrapper ends).
		wait := scanEvery // it exited: its next process comes soon
		if err != nil {
			p.log.Debug("opencode is not a local process of this user; no process view", "url", p.where(), "err", err)
			wait = time.Minute
		}
		select {
		case <-ctx.Done():
			return
		case <-p.again:
		case <-time.After(wait):
		}
	}
}

// find is the local OpenCode process: run's child, else the process of
// this user listening on the server's loopback port, else a 2.x server's
// own pid when it is this user's OpenCode.
func (p *procWatch) find(tab procview.Table) (int, error) {
	if p.pid > 0 {
		return p.pid, nil
	}
	port, err := p.loopbackPort()
	if err != nil {
		return 0, err
	}
	// The pid a 2.x server reports is its own only in its own pid
	// namespace: in a container published on loopback it names some
	// process here. Taken only when it is this user's, in this
	// namespace, and holds the listener (macOS cannot tell the listener:
	// there the process and its owner are checked).
	if pid := p.client.PID(); pid > 0 {
		if err := procview.VerifyServerPID(tab, pid, port, os.Getuid()); err == nil || errors.Is(err, errors.ErrUnsupported) {
			if proc, err := tab.Read(pid); err == nil && proc.UID == os.Getuid() && procview.IsOpenCode(proc) {
				return pid, nil
			}
		}
	}
	pid, err := procview.ListenerPID(port, os.Getuid())
	if err != nil {
		return 0, err
	}
	// What listens may be a tunnel or a proxy (ssh -L, socat) to an
	// OpenCode elsewhere: its children are not OpenCode's.
	if proc, err := tab.Read(pid); err != nil || !procview.IsOpenCode(proc) {
		return 0, fmt.Errorf("the process listening on port %d (pid %d) is not OpenCode", port, pid)
	}
	return pid, nil
}

// loopbackPort is the port of the server's URL, when its host is this
// machine's loopback: the only case where a process here can be it.
func (p *procWatch) loopbackPort() (int, error) {
	u, err := url.Parse(p.client.URL())
	if err != nil {
		return 0, err
	}
	if host := u.Hostname(); !loopback.Host(host) {
		return 0, fmt.Errorf("%s is not a loopback address", host)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0, fmt.Errorf("no port in %s", p.client.URL())
	}
	return port, nil
}

// syncServers gives v the engine's local servers when they changed.
func (p *procWatch) syncServers(v *procview.View) {
	if p.eng == nil {
		return
	}
	p.mu.Lock()
	since, servers := p.gen, p.servers
	p.mu.Unlock()
	g, locals, changed := p.eng.LocalServers(since)
	if !changed {
		return
	}
	// Every config read is a new generation, mostly of the same list:
	// that one is kept (and the view, given it again, builds nothing).
	same := slices.EqualFunc(servers, locals, func(s procview.LocalServer, l reconnect.LocalServer) bool {
		return s.Directory == l.Directory && s.Name == l.Name && s.Cwd == l.Cwd && slices.Equal(s.Command, l.Command)
	})
	if !same {
		servers = make([]procview.LocalServer, 0, len(locals))
		for _, l := range locals {
			servers = append(servers, procview.LocalServer{Directory: l.Directory, Name: l.Name, Command: l.Command, Cwd: l.Cwd})
		}
		slices.SortFunc(servers, func(a, b procview.LocalServer) int { return a.Key().Compare(b.Key()) }) // the engine's order already
	}
	v.SetServers(servers)
	p.mu.Lock()
	if !same {
		clear(p.launchers)
	}
	p.gen, p.servers = g, servers
	p.mu.Unlock()
}

// launcher is how the local server k runs, read from its command when
// first asked: a launcher for each of 10,000 servers cost a map of them
// all, rebuilt with every list.
func (p *procWatch) launcher(k procview.Key) procview.Launcher {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.launchers[k]; ok {
		return l
	}
	var l procview.Launcher
	if i, ok := slices.BinarySearchFunc(p.servers, k, func(s procview.LocalServer, k procview.Key) int { return s.Key().Compare(k) }); ok {
		l = procview.LauncherOf(p.servers[i].Command)
	}
	p.launchers[k] = l
	return l
}

// watch follows one OpenCode process's children until it exits, the
// server is replaced, or ctx ends.
func (p *procWatch) watch(ctx context.Context, tab procview.Table, pid int) error {
	v, err := procview.NewView(tab, pid)
	if err != nil {
		return err
	}
	p.clock.Store(&tab)
	ctx, cancel := context.WithCancel(ctx)
	var exits *procview.Exits
	var wg sync.WaitGroup
	var exitsEnded atomic.Bool // Run returned before the watch ended: scans find exits again
	if p.newExits != nil {
		if exits, err = p.newExits(); err != nil {
			p.log.Debug("no exit watcher; scanning for exits", "err", err) // exits is nil (NewExits)
		} else {
			wg.Go(func() {
				exits.Run(ctx, func(x procview.Exit) {
					p.mu.Lock()
					p.exitAt[x.PID] = x.At
					p.mu.Unlock()
					v.Exited(x.PID, x.Birth)
					p.Look()
				})
				exitsEnded.Store(true)
				p.Look()
			})
			// OpenCode's own end, the moment it comes: the record says when.
			if err := exits.Add(tab, v.OpenCode()); err != nil {
				p.log.Debug("cannot watch opencode for its exit; scanning for it", "pid", pid, "err", err)
			}
		}
	}
	p.log.Debug("watching opencode's MCP processes", "url", p.where(), "pid", pid, "exit_watcher", exits != nil)
	p.mu.Lock()
	p.root, p.view, p.last, p.gen = pid, v, procview.Snapshot{}, ^uint64(0)
	clear(p.seen)
	p.mu.Unlock()
	defer func() {
		cancel()
		wg.Wait()
		if exits != nil {
			_ = exits.Close()
		}
		p.mu.Lock()
		p.root, p.view, p.last = 0, nil, procview.Snapshot{}
		clear(p.exitAt)
		p.mu.Unlock()
	}()
	var prev procview.Snapshot
	watched := map[int]uint64{} // pid → birth handed to the exit watcher
	partial := false            // some child could not be watched: scan for exits
	var saved, lastScan time.Time
	dirty := true // the record names this OpenCode from its first scan
	for {
		p.syncServers(v)
		start := time.Now()
		s, err := v.Scan()
		lastScan = time.Now()
		if err == nil {
			evs := procview.Diff(prev, s)
			for _, ev := range evs {
				switch {
				case ev.Kind == procview.Exited:
					p.mu.Lock()
					at := cmp.Or(p.exitAt[ev.Child.PID], ev.At) // the exit watcher's time, when it saw it (never zero)
					delete(p.exitAt, ev.Child.PID)
					p.mu.Unlock()
					p.log.Debug("MCP server process exited", "url", p.where(), "directory", ev.Key.Directory, "server", ev.Key.Name, "child", ev.Child)
					// Whether a child started since serves it (OpenCode
					// started a new one, an older duplicate was ended) is
					// the engine's question, asked of the process table
					// when it decides (Successor); an older one left
					// running is none: OpenCode talks to its newest.
					if p.eng != nil {
						p.eng.ChildExited(ev.Key.Directory, ev.Key.Name, ev.Child.Birth, at)
					}
				case ev.Kind == procview.Started && p.eng != nil:
					p.eng.ChildStarted(ev.Key.Directory, ev.Key.Name, ev.At)
				}
			}
			if len(evs) > 0 || s.Gen() != prev.Gen() {
				// Something new (every event, and a child OpenCode
				// started for no armed server yet, its config not read):
				// recorded.
				dirty = true
				if !s.Gone {
					p.forgetBelow(s) // the last save needs what ran below
				}
			}
			if exits != nil && (len(evs) > 0 || prev.At.IsZero() || s.Gen() != prev.Gen()) {
				partial = p.watchExits(exits, tab, s, watched) || partial
			}
			if s.Gone && !prev.At.IsZero() {
				// What proves its orphans: the last children seen under
				// it (prev is never a Gone snapshot), and when it ended.
				p.save(prev, v, tab.Now())
			}
			p.mu.Lock()
			p.last = s
			// The exit times of processes s no longer lists, that no
			// Diff will take (OpenCode's other children, which serve no
			// armed server).
			maps.DeleteFunc(p.exitAt, func(pid int, _ time.Time) bool { return !s.Lists(pid) })
			p.mu.Unlock()
			if s.Gone {
				return nil // OpenCode exited: find the next one
			}
			prev = s
			if dirty && time.Since(saved) >= recordEvery {
				dirty, saved = !p.save(s, v, 0), time.Now() // saved: when the save ended
			}
		}
		every := procview.ScanPeriod(scanEvery, lastScan.Sub(start))
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
				p.save(prev, v, tab.Now())
			}
			return nil
		case <-p.again:
			p.replaced() // for run's loop: look for it now
			return nil
		case <-p.look:
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

// watchExits hands the exit watcher every live child of s it does not
// watch yet, and forgets those gone; it reports whether one could not be
// watched (then scans must find its exit). Only OpenCode's children: the
// end of a process below a launcher that runs on (a shell with a next
// command, a build step before the server) closes no pipe of OpenCode's,
// and nothing tells a build step from a server there; a crash is the
// child's subtree ending, which its own exit shows.
func (p *procWatch) watchExits(exits *procview.Exits, tab procview.Table, s procview.Snapshot, watched map[int]uint64) (partial bool) {
	live := map[int]bool{}
	add := func(c procview.Child) {
		live[c.PID] = true
		if b, ok := watched[c.PID]; ok && b == c.Birth {
			return
		}
		if err := exits.Add(tab, procview.Process{PID: c.PID, Birth: c.Birth}); err != nil {
			if !partial {
				p.log.Debug("cannot watch an MCP process for its exit; scanning for it", "pid", c.PID, "err", err)
			}
			partial = true
			return
		}
		watched[c.PID] = c.Birth
	}
	for _, cs := range s.Servers {
		for _, c := range cs {
			add(c)
		}
	}
	for _, c := range s.Others {
		add(c)
	}
	maps.DeleteFunc(watched, func(pid int, _ uint64) bool { return !live[pid] })
	return partial
}

// maxBelowTries bounds how often a child's server process is looked for
// (a launcher still installing has none yet).
const maxBelowTries = 5

// serverBelow finds (once, then from the cache) the process below child
// c that runs its server.
func (p *procWatch) serverBelow(tab procview.Table, c procview.Child) serverBelow {
	id := ident{c.PID, c.Birth}
	p.mu.Lock()
	b := p.below[id] // none: the zero serverBelow, not known, never tried
	p.mu.Unlock()
	if b.known && !procview.IdentOf(b.proc).Alive(tab) {
		// A step that ended (a build before the server, a shell's
		// first command): what runs below the launcher now is another.
		b = serverBelow{}
	}
	if b.known || b.tries >= maxBelowTries {
		return b
	}
	proc, inContainer, err := procview.ServerProcess(tab, procview.Process{PID: c.PID, Birth: c.Birth})
	b.tries++
	if err == nil {
		b.proc, b.inContainer, b.known = proc, inContainer, true
	}
	p.mu.Lock()
	p.below[id] = b
	p.mu.Unlock()
	return b
}

// forgetBelow drops the cache entries of children no longer in s.
func (p *procWatch) forgetBelow(s procview.Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.below) == 0 {
		return
	}
	live := make(map[ident]bool, len(p.below))
	for _, cs := range s.Servers {
		for _, c := range cs {
			live[ident{c.PID, c.Birth}] = true
		}
	}
	maps.DeleteFunc(p.below, func(id ident, _ serverBelow) bool { return !live[id] })
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
func (p *procWatch) save(s procview.Snapshot, v *procview.View, ended uint64) (complete bool) {
	if p.record == nil {
		return true
	}
	complete = true
	root := v.OpenCode()
	rec := procview.Sightings{OpenCode: procview.IdentOf(root), At: s.At, Boot: p.table.BootID(), End: ended}
	if root.PGID == os.Getpid() {
		// run: the wrapper leads OpenCode's group (the terminal's job),
		// and this process is the wrapper.
		if self, err := p.table.Stat(os.Getpid()); err == nil && self.PGID == self.PID {
			rec.Leader = procview.IdentOf(self)
		}
	}
	parents := map[int]procview.Ident{root.PID: procview.IdentOf(root)}
	parentOf := func(pid int) procview.Ident {
		if _, ok := parents[pid]; !ok {
			if pp, err := p.table.Stat(pid); err == nil {
				parents[pid] = procview.IdentOf(pp)
			}
		}
		return parents[pid]
	}
	var found []procview.Sighting
	for k, cs := range s.Servers {
		l := p.launcher(k)
		for _, c := range cs {
			parent := parentOf(c.Parent)
			found = append(found, procview.Sighting{Ident: c.Ident(), Parent: parent, Directory: k.Directory, Server: k.Name})
			if l.Name == "" || l.InContainer {
				continue
			}
			// The server below a launcher too: a launcher ended by a
			// signal can leave it (npm's node survives npm's SIGKILL).
			var b serverBelow
			if ended == 0 {
				b = p.serverBelow(p.table, c)
				complete = complete && (b.known || b.tries >= maxBelowTries)
			} else {
				p.mu.Lock()
				b = p.below[ident{c.PID, c.Birth}]
				p.mu.Unlock()
			}
			if b.known && b.proc.PID != c.PID && !b.inContainer {
				found = append(found, procview.Sighting{Ident: procview.IdentOf(b.proc), Parent: parent, Directory: k.Directory, Server: k.Name})
			}
		}
	}
	// OpenCode's other children (a server of a directory no daemon
	// armed, a language server, a command): seen under it, though which
	// server they run is not known here; Orphans matches their command.
	for _, c := range s.Others {
		found = append(found, procview.Sighting{Ident: c.Ident(), Parent: parentOf(c.Parent)})
	}
	p.mu.Lock()
	for _, x := range found {
		if id := (ident{x.PID, x.Birth}); p.seen[id].Server == "" { // unseen, or seen serving none
			p.seen[id] = x
		}
	}
	// One that ended proves nothing any more.
	maps.DeleteFunc(p.seen, func(_ ident, x procview.Sighting) bool { return !x.Alive(p.table) })
	rec.Seen = slices.Collect(maps.Values(p.seen))
	p.mu.Unlock()
	slices.SortFunc(rec.Seen, func(a, b procview.Sighting) int { return a.PID - b.PID })
	if err := p.record.Save(rec); err != nil {
		p.log.Debug("could not record the MCP processes", "err", err)
	} else {
		p.log.Debug("recorded opencode's MCP processes", "url", p.where(), "pid", root.PID, "processes", len(rec.Seen), "record", p.record.Dir)
	}
	return complete
}

// info is what status shows of the processes; nil while no local
// OpenCode is watched. A scan older than freshFor is made again first:
// right after start, or between slow scans, the last one may predate a
// child.
func (p *procWatch) info() *reconnect.Processes {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	v, stale := p.view, time.Since(p.last.At) > freshFor
	p.mu.Unlock()
	if v != nil && stale {
		p.syncServers(v)
		if s, err := v.Scan(); err == nil {
			p.mu.Lock()
			if p.view == v {
				p.last = s
			}
			p.mu.Unlock()
			p.Look() // the watch loop diffs it too
		}
	}
	p.mu.Lock()
	last, root, tab := p.last, p.root, p.table
	p.mu.Unlock()
	if root == 0 || last.At.IsZero() || last.Gone {
		return nil
	}
	out := &reconnect.Processes{OpenCodePID: root}
	if tab != nil {
		out.Servers = p.serverProcesses(tab, last)
	}
	for _, cs := range last.Servers {
		out.Children += len(cs)
	}
	for _, d := range last.Duplicates() {
		for _, k := range d.Keys {
			g := reconnect.ProcessGroup{Directory: k.Directory, Server: k.Name}
			for _, c := range d.Children {
				g.PIDs = append(g.PIDs, c.PID)
				g.Command = c.Command()
			}
			out.Duplicates = append(out.Duplicates, g)
		}
	}
	return out
}

// serverProcesses is what runs each local server of s: the child
// OpenCode started, its launcher's name, and the process below it that
// runs the server, in key order.
func (p *procWatch) serverProcesses(tab procview.Table, s procview.Snapshot) []reconnect.ServerProcess {
	var out []reconnect.ServerProcess
	for _, k := range slices.SortedFunc(maps.Keys(s.Servers), procview.Key.Compare) {
		c, _ := s.Child(k)
		l := p.launcher(k)
		sp := reconnect.ServerProcess{Directory: k.Directory, Server: k.Name, PID: c.PID, Command: c.Command(), Launcher: l.Name, InContainer: l.InContainer, LauncherRunsOn: l.Name != "" && !l.ExitsWithServer}
		if l.Name != "" && !l.InContainer {
			if b := p.serverBelow(tab, c); b.known && b.proc.PID != c.PID {
				sp.ServerPID, sp.ServerCommand = b.proc.PID, procview.Display(b.proc.Argv)
			}
		}
		out = append(out, sp)
	}
	return out
}
