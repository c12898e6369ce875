package reconnect

import (
	"maps"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// OpenCode's events only arm directories and wake them (rule 6); they are
// never the source of truth, and each is bounded: a wake never postpones a
// check, activity wakes at most once per idle interval, a crash report's
// shortcut runs at most once per initial-delay per directory.

// HandleEvent applies one OpenCode event: arming, waking, disposing.
func (e *Engine) HandleEvent(ev opencode.Event) {
	switch ev.Kind {
	case opencode.KindServerFailed:
		// A crash report (1.x mcp.tools.changed: a live MCP connection
		// closed). A first crash is checked at once (firstCrash). A report
		// that arms its directory is such a first crash too: the server
		// was connected (its connection closed), and nobody here
		// reconnected it. A crash loop gets no shortcut: its directory is
		// checked initial-delay later, and not at all once the server is
		// in the slow tier.
		first := e.wakeDelay()
		if ev.Server != "" {
			first = 0
		}
		e.armOrWake(ev.Directory, ev.Type, first, func(d *dir, now time.Time) { e.reported(d, ev.Server, now) })
	case opencode.KindServerChanged:
		e.serverChanged(ev.Directory, ev.Server, ev.Type)
	case opencode.KindInstanceGone:
		e.instanceGone(ev.Directory, ev.Type)
	case opencode.KindAllGone:
		// Every directory is forgotten (global.disposed); the engine keeps
		// running and arms again on later events.
		e.mu.Lock()
		var evs []Event
		for _, p := range opencode.Names(e.dirs) {
			evs = append(evs, e.disarmLocked(p, ev.Type))
		}
		e.mu.Unlock()
		e.publish(evs...)
	case opencode.KindActivity:
		e.activity(ev.Directory, ev.Type)
	}
	// Everything else, project.* events included, arms nothing: those name
	// directories nobody may be using, and reading their status would
	// start their MCP servers.
}

// armOrWake arms path for reason if it is not armed (its first check
// first later); if it is, it calls wake on it with Engine.mu held. Events
// for directories that are not absolute paths are ignored.
func (e *Engine) armOrWake(path, reason string, first time.Duration, wake func(d *dir, now time.Time)) {
	if !validDir(path) {
		return
	}
	e.mu.Lock()
	if e.ctx == nil {
		e.mu.Unlock()
		return
	}
	now := time.Now()
	if d, ok := e.dirs[path]; ok {
		d.lastEvent = now
		wake(d, now)
		e.mu.Unlock()
		return
	}
	if e.named[path] {
		reason = ArmedByFlag // disposed, and used again: still the user's
	}
	ev := e.armLocked(path, reason, first)
	if d := e.dirs[path]; d != nil {
		d.byEvent, d.lastEvent = true, now
	}
	e.mu.Unlock()
	e.publish(ev)
}

// reported wakes d for a report about its server name ("": none named):
// at once for a first crash (firstCrash), else initial-delay later, and
// not at all for a server in the slow tier or stopped (a permanently
// broken server must not keep its directory busy), unless the daemon
// believes it connected: then initial-delay later too, so that status
// follows OpenCode. Caller holds Engine.mu.
func (e *Engine) reported(d *dir, name string, now time.Time) {
	if s := d.servers[name]; name != "" && s != nil {
		if e.firstCrash(d, s, now) {
			return
		}
		if s.trig&trigDead != 0 && !s.connecting {
			// OpenCode's word on an exit the process view saw: the
			// grace waited for it (ChildExited), so a crash loop is
			// checked at its episode's time, not the grace's.
			d.wakeBy(backoff.Later(s.ep.Next(), now))
			return
		}
		switch s.ep.Phase(e.cfg.Backoff) {
		case backoff.Slow, backoff.Stopped:
			if s.status != opencode.StatusConnected || s.connecting {
				return
			}
			// The last read showed an attempt of ours brought it back,
			// and OpenCode now says it changed: status must not go on
			// saying connected. The ordinary wake reads it (no attempt:
			// the episode allows none), at most once per initial-delay
			// however many reports come.
		}
	}
	d.wakeBy(now.Add(e.wakeDelay()))
}

// firstCrash checks d at once when the server s, last seen connected and
// stable (stable-after since its last attempt returned), is reported
// changed: a new episode, not a crash loop, so a crashed stdio server is
// back in about the time OpenCode takes to spawn it. At most once per
// initial-delay per directory, so a server that spams the event cannot
// make it a status read each. The check connects only what its read shows
// failed. Caller holds Engine.mu.
//
// A report that does not say the server failed (2.x mcp.status.changed)
// is checked at once too, also just after a read of the daemon's own: it
// is OpenCode's word, and the check reads before it connects. Changes a
// read causes (it booted the location, whose servers announce every
// transition) cost at most the one read per initial-delay.
//
// A report of a server whose process the view saw exit (trigDead) is
// OpenCode's word on that exit, not news: its check at once was counted
// when the exit came (ChildExited), and waits only for this word.
func (e *Engine) firstCrash(d *dir, s *server, now time.Time) bool {
	spoken := s.trig&trigDead != 0
	if !e.stableConnected(s, now) || s.connecting || !spoken && !d.atOnce(now, e.cfg.Backoff.Initial) {
		return false
	}
	s.forget()
	d.wakeBy(now)
	return true
}

// stableConnected is the first-crash rule (SPEC rule 4): a server last
// seen connected that stayed so for stable-after since its last attempt
// returned starts a new episode when it is reported down, and is checked
// at once; one that is not (a crash loop) waits for its episode.
func (e *Engine) stableConnected(s *server, now time.Time) bool {
	return s.status == opencode.StatusConnected && s.ep.Stable(now, e.cfg.StableAfter)
}

// atOnce reports whether the directory may be checked at once now, and
// if so counts it: at most once per every (initial-delay), so that many
// reports at once (a server spamming its event, OpenCode killing all its
// children) cost one read, not one each.
func (d *dir) atOnce(now time.Time, every time.Duration) bool {
	if now.Sub(d.lastAtOnce) < every {
		return false
	}
	d.lastAtOnce = now
	return true
}

// serverChanged handles a state change of a server (OpenCode 2's
// mcp.status.changed, sent on every transition, which does not say to
// what). A server last seen connected and stable may have crashed: it is
// checked at once, as 1.x's crash report is (firstCrash); the read decides.
// Any other change is a wake initial-delay later. Changes the engine
// causes itself (a connect in flight, or one that just returned, whose
// outcome the schedule re-checks anyway) and changes of a server in the
// slow tier (rule 5) wake nothing. A change that arms its directory (a
// location booting is a burst of them) waits initial-delay.
func (e *Engine) serverChanged(path, name, reason string) {
	e.mu.Lock()
	gone, ok := e.gone[path]
	e.mu.Unlock()
	if ok && time.Since(gone) < goneQuarantine {
		// A location stopping its servers may announce each of them after
		// location.shutdown: that is no sign of use, and arming would
		// boot the location again.
		return
	}
	e.armOrWake(path, reason, e.wakeDelay(), func(d *dir, now time.Time) {
		if s := d.servers[name]; name != "" && s != nil && (s.connecting || now.Sub(s.ep.Last()) < e.cfg.Backoff.Initial) {
			return
		}
		e.reported(d, name, now)
	})
}

// goneQuarantine is how long after its instance went away a directory is
// not armed by server state changes.
const goneQuarantine = 10 * time.Second

// instanceGone disarms path, whose instance went away (reason), and
// records when, for the quarantine; old records are pruned.
func (e *Engine) instanceGone(path, reason string) {
	e.mu.Lock()
	ev := e.disarmLocked(path, reason)
	now := time.Now()
	maps.DeleteFunc(e.gone, func(_ string, t time.Time) bool { return now.Sub(t) >= goneQuarantine })
	e.gone[path] = now
	e.mu.Unlock()
	e.publish(ev)
}

// activity arms dir, or wakes it at most once per idle interval.
func (e *Engine) activity(path, reason string) {
	e.armOrWake(path, reason, e.wakeDelay(), func(d *dir, now time.Time) {
		if now.Sub(d.lastActivity) >= e.cfg.IdleInterval {
			d.lastActivity = now
			d.wakeBy(now.Add(e.wakeDelay()))
		}
	})
}
