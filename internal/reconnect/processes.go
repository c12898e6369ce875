package reconnect

import (
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// OpenCode before about 1.15 never reports a dead stdio server: its status
// stays "connected", no event comes, and its tools are gone until OpenCode
// restarts. Where OpenCode runs on this machine as this user, the daemon
// watches its MCP children (internal/procview) and tells the engine when
// the child serving a local server exits (ChildExited). That is a crash
// report the status would never give: the directory is checked, and a
// server the fresh read still shows "connected" is connected again, on the
// evidence of the exit and a read sent after it, within its episode's
// schedule (a first crash at once, a crash loop backing off). A server
// the read shows disabled, needs_auth or needs_client_registration is
// left alone whatever the evidence; one it shows failed follows the usual
// path.

// LocalServers lists the local servers of every armed directory whose
// config was read, in key order, and a counter that changes whenever the
// list may have; when the counter is still since, it returns no list
// (changed false): a caller that asks every few seconds copies a
// thousand directories' list only when it changed. Each Command is
// shared with the engine and every directory configured alike: never
// change it.
func (e *Engine) LocalServers(since uint64) (gen uint64, servers []procview.LocalServer, changed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.localsGen == since {
		return since, nil, false
	}
	for _, path := range opencode.Names(e.dirs) {
		d := e.dirs[path]
		for _, name := range opencode.Names(d.config) {
			if c := d.config[name]; c.command != nil {
				servers = append(servers, procview.LocalServer{Directory: path, Name: name, Command: c.command, Cwd: c.cwd})
			}
		}
	}
	return e.localsGen, servers, true
}

// ChildExited tells the engine that the process serving the local server
// name in dir, born at birth (the process view's clock: ProcessView.Clock),
// was seen gone at (the exit happened before), and no other child serves
// it. The directory is checked: at once for a first crash (a server that
// stayed connected and stable), at its episode's next attempt for a crash
// loop; the check decides from a read sent after at. A child born before
// the engine's last connect of the server began is no news: that connect
// replaced it (a connect of a connected local server starts a new
// process, and the old one exits), or answered its crash. One born since
// is news even while a connect is in flight: the child that connect
// started may die before it returns, and on a release that never says so
// nothing else would tell. Birth and connect are read on one clock, the
// process view's: a start time computed from the boot time in whole
// seconds is up to a second early, and would pass the very child a
// connect started for older than that connect.
func (e *Engine) ChildExited(dir, name string, birth uint64, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.dirs[dir]
	if d == nil {
		return
	}
	s := d.servers[name]
	if s == nil || birth < s.connectClock {
		return
	}
	if s.dead == nil {
		s.dead = &deadChild{}
	}
	if s.trig&trigDead != 0 {
		// Several exits before the check: the newest child's is the one
		// OpenCode talked to, and a successor must be newer than it (an
		// older duplicate's exit after it must not pass the one between
		// for its successor).
		birth = max(s.dead.birth, birth)
	}
	s.dead.birth = birth
	s.trig |= trigDead
	s.dead.at = backoff.Later(s.dead.at, at)
	now := time.Now()
	// A short grace first: an exit OpenCode caused itself (a disposal, a
	// disconnect) is announced on the event stream about when the child
	// dies, and the check must see that, not read (and so re-create) a
	// disposed instance, or connect a server being disabled.
	soon := now.Add(announceGrace)
	switch {
	case s.status == opencode.StatusConnected && !e.stableConnected(s, now):
		d.wakeBy(backoff.Later(s.ep.Next(), soon)) // a crash loop waits for its episode
	case d.atOnce(now, e.cfg.Backoff.Initial):
		d.wakeBy(soon)
	default:
		d.wakeBy(now.Add(e.wakeDelay()))
	}
}

// announceGrace is how long the engine waits, after something ended that
// OpenCode may have ended itself, for OpenCode's word on the event stream
// before it reads the directory: a child's exit (a disposal, a
// disconnect), a connect's return (a disposal answers a connect in
// flight). A read of a disposed instance re-creates it. Once OpenCode
// has spoken, the wait is over (reported).
const announceGrace = 500 * time.Millisecond

// deadChild decides a connect for a server whose child exited while its
// fresh read says connected: allowed when the read was sent after the exit
// was seen and the episode's schedule allows an attempt now. Otherwise the
// evidence is kept for the next read. Caller holds Engine.mu.
func (e *Engine) deadChild(d *dir, s *server, name string, now time.Time) (attempt, bool) {
	if s.dead != nil && d.readStart.Before(s.dead.at) {
		s.trig |= trigDead // the read may predate the exit: look again soon
		d.wakeBy(now.Add(e.wakeDelay()))
		return attempt{}, false
	}
	if !s.ep.Allow(e.cfg.Backoff, now, backoff.Scheduled) {
		s.trig |= trigDead
		return attempt{}, false
	}
	e.log.Info("MCP server's process exited but OpenCode still says connected; reconnecting", "url", e.url, "directory", d.path, "server", name)
	return attempt{name, backoff.Scheduled, trigDead}, true
}

// ProcessView is what the engine asks of the process view when it
// decides on a dead child: the process table as it is now, not as the
// last scan saw it.
type ProcessView interface {
	// Successor reports whether a process born after birth now serves
	// the local server name of dir: OpenCode started it again by itself
	// (a config reload, a restart of the server, another client's
	// connect), so the exit needs no repair.
	Successor(dir, name string, birth uint64) bool
	// Clock reads the clock births count in (procview.Table.Now): a
	// process born before a reading started before it. It must not
	// block.
	Clock() uint64
	// Look says that OpenCode's children may have changed: a connect
	// returned, a status read saw a local server change. It must not
	// block.
	Look()
}

// SetProcessView gives the engine the process view it asks at decision
// time: the view of each OpenCode process as it is found.
func (e *Engine) SetProcessView(pv ProcessView) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.procs = pv
}

// successors asks the process view, right after a status read and before
// the decision it feeds, which of the directory's servers with a dead
// child that the read shows connected now have a successor: the evidence
// of their dead child is void. It reads the process table, so it runs
// without Engine.mu.
func (e *Engine) successors(d *dir, st map[string]opencode.MCPServerStatus) {
	e.mu.Lock()
	pv := e.procs
	type dead struct {
		name  string
		birth uint64
	}
	var ask []dead
	if pv != nil {
		for name, s := range d.servers {
			if s.trig&trigDead != 0 && st[name].Status == opencode.StatusConnected {
				ask = append(ask, dead{name, s.dead.birth})
			}
		}
	}
	e.mu.Unlock()
	for _, a := range ask {
		if pv.Successor(d.path, a.name, a.birth) {
			e.mu.Lock()
			d.servers[a.name].trig &^= trigDead // only the check, which runs this, deletes a server
			e.mu.Unlock()
			e.log.Debug("a new process serves the MCP server whose process exited; nothing to repair",
				"url", e.url, "directory", d.path, "server", a.name)
		}
	}
}

// ChildStarted tells the engine that a process started at at now serves
// the local server name in dir: evidence of an earlier exit is void
// (OpenCode started it again itself: a config reload, a restart of the
// server), and must not make a later check connect a healthy server.
func (e *Engine) ChildStarted(dir, name string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.dirs[dir]
	if d == nil {
		return
	}
	if s := d.servers[name]; s != nil && s.trig&trigDead != 0 && at.After(s.dead.at) {
		s.trig &^= trigDead
	}
}
