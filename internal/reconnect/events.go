package reconnect

import (
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
		e.serverFailed(ev.Directory, ev.Server, ev.Type)
	case opencode.KindServerChanged:
		e.serverChanged(ev.Directory, ev.Server, ev.Type)
	case opencode.KindInstanceGone:
		e.Disarm(ev.Directory, ev.Type)
		e.markGone(ev.Directory)
	case opencode.KindAllGone:
		e.DisarmAll(ev.Type)
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
	if d, ok := e.dirs[path]; ok {
		wake(d, time.Now())
		e.mu.Unlock()
		return
	}
	ev := e.armAtLocked(path, reason, first)
	e.mu.Unlock()
	e.publish(ev)
}

// serverFailed handles a crash report (a live MCP connection closed). A
// first crash of a server that was connected and stable is checked at once
// (at most once per initial-delay per directory, so a server that spams the
// event cannot make it a status read each): a crashed stdio server is back
// in about the time OpenCode takes to spawn it. A report that arms its
// directory is such a first crash too: the server was connected (its
// connection closed), and nobody here reconnected it. A crash loop gets no
// shortcut: its directory is checked initial-delay later, and not at all
// once the server is in the slow tier.
func (e *Engine) serverFailed(path, name, reason string) {
	first := e.wakeDelay()
	if name != "" {
		first = 0
	}
	e.armOrWake(path, reason, first, func(d *dir, now time.Time) {
		s := d.servers[name]
		if name == "" || s == nil {
			d.wakeBy(now.Add(e.wakeDelay()))
			return
		}
		stable := s.ep.Stable(now, e.cfg.StableAfter)
		if s.status == opencode.StatusConnected && stable && now.Sub(d.lastAtOnce) >= e.cfg.Backoff.Initial {
			// It stayed connected since its last attempt for stable-after:
			// this is a new episode, not a crash loop.
			s.forget()
			d.lastAtOnce = now
			d.wakeBy(now)
			return
		}
		switch s.ep.Phase(e.cfg.Backoff) {
		case backoff.Slow, backoff.Stopped:
			return // a permanently broken server must not keep its directory busy
		}
		d.wakeBy(now.Add(e.wakeDelay()))
	})
}

// serverChanged handles a state change of a server (OpenCode 2's
// mcp.status.changed, sent on every transition): a wake, not a crash
// report, so a check initial-delay later and no shortcut. Changes the
// engine causes itself (a connect in flight, or one that just returned,
// whose outcome the schedule re-checks anyway) and changes of a server in
// the slow tier (rule 5) wake nothing.
func (e *Engine) serverChanged(path, name, reason string) {
	if e.recentlyGone(path) {
		// A location stopping its servers may announce each of them after
		// location.shutdown: that is no sign of use, and arming would
		// boot the location again.
		return
	}
	e.armOrWake(path, reason, e.wakeDelay(), func(d *dir, now time.Time) {
		if s := d.servers[name]; name != "" && s != nil {
			if s.connecting || now.Sub(s.ep.Last()) < e.cfg.Backoff.Initial {
				return
			}
			switch s.ep.Phase(e.cfg.Backoff) {
			case backoff.Slow, backoff.Stopped:
				return
			}
		}
		d.wakeBy(now.Add(e.wakeDelay()))
	})
}

// goneQuarantine is how long after its instance went away a directory is
// not armed by server state changes.
const goneQuarantine = 10 * time.Second

// markGone records that path's instance went away; old records are pruned.
func (e *Engine) markGone(path string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for p, t := range e.gone {
		if now.Sub(t) >= goneQuarantine {
			delete(e.gone, p)
		}
	}
	e.gone[path] = now
}

// recentlyGone reports whether path's instance went away within the
// quarantine.
func (e *Engine) recentlyGone(path string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.gone[path]
	return ok && time.Since(t) < goneQuarantine
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
