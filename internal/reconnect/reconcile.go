// reconcile.go holds the reconcile: how one status read is folded into a
// directory's memory and what it decides, server by server and by the
// status the read shows (connected, failed, pending, or one left to the
// user), from that read alone.

package reconnect

import (
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// attempt is one connect a reconcile decided on, and what caused it: the
// limiter's view (trigger) and the trigger bit that asked (trig, 0 for the
// schedule), kept while the attempt waits for a slot.
type attempt struct {
	name    string
	trigger backoff.Trigger
	trig    int
}

// reconcile folds one status read into the directory's memory and decides
// from it alone: the failed servers to connect now (with their cause),
// the events to publish, and (in d.next) when to look again; a server
// the config did not list makes the next check learn the kinds again.
// Caller holds Engine.mu.
func (e *Engine) reconcile(d *dir, st map[string]opencode.MCPServerStatus, now time.Time) (connects []attempt, evs []Event) {
	e.forgetUnlisted(d, st)
	next := e.idleAt(now)
	// In name order (the random draws come in it), sorted in the
	// directory's own buffer: an idle check copies no names.
	d.order = slices.AppendSeq(d.order[:0], maps.Keys(st))
	slices.Sort(d.order)
	for _, name := range d.order {
		r := d.observe(name, st[name])
		if _, known := d.config[name]; !known && (r.cur.Status == opencode.StatusFailed || r.cur.Status == opencode.StatusConnected) {
			d.kindsKnown = false
		}
		var o outcome
		switch r.cur.Status {
		case opencode.StatusConnected:
			o = e.reconcileConnected(d, r, now)
		case opencode.StatusFailed:
			o = e.reconcileFailed(d, r, now)
		case opencode.StatusPending:
			o = e.reconcilePending(d, r, now)
		default:
			o = e.reconcileLeftAlone(d, r, now)
		}
		if o.connect != nil {
			connects = append(connects, *o.connect)
		}
		evs = append(evs, o.evs...)
		next = earlier(next, o.next)
	}
	d.wakeBy(next)
	d.netTrig = 0
	return connects, evs
}

// read is one server's line of a status read, with what the directory
// remembered of the server before it.
type read struct {
	name string
	cur  opencode.MCPServerStatus
	s    *server
	// prev is the status the read before showed ("" for a server new to
	// this directory).
	prev string
	// trig holds the triggers set since the last read, consumed by this
	// one.
	trig int
	// confirmed: the read shows the outcome of an attempt of ours.
	confirmed bool
}

// outcome is what one server's read decided: at most one connect, the
// events to publish, and when to look again (zero: nothing of its own).
type outcome struct {
	connect *attempt
	evs     []Event
	next    time.Time
}

// forgetUnlisted forgets every server the read no longer lists: it is no
// longer configured, and starts afresh if it comes back. Caller holds
// Engine.mu.
func (e *Engine) forgetUnlisted(d *dir, st map[string]opencode.MCPServerStatus) {
	for name, s := range d.servers {
		if _, ok := st[name]; !ok {
			s.endWatch()
			s.stopProbes()
			delete(d.servers, name)
			if d.config.local(name) {
				e.localsGen++
			}
			if _, ok := d.config[name]; ok { // a copy: d.config may be shared
				d.config = maps.Clone(d.config)
				delete(d.config, name)
			}
		}
	}
}

// observe folds what the read says of one server into the directory's
// memory, whatever its status: the status itself, and the end of what
// the read answers (the triggers and a wait for a slot, which this read
// decides afresh; a pending run; the attempt it confirms). Caller holds
// Engine.mu.
func (d *dir) observe(name string, cur opencode.MCPServerStatus) read {
	s := d.servers[name]
	if s == nil {
		s = &server{}
		d.servers[name] = s
	}
	r := read{name: name, cur: cur, s: s, prev: s.status, trig: s.trig | d.netTrig}
	s.status, s.err = cur.Status, cur.Error
	if d.config.local(name) && r.prev != cur.Status {
		d.localsChanged = true
	}
	s.trig, s.slotWait = 0, false
	switch {
	case s.connecting:
		// A read during our connect decides nothing of the server (the
		// reconcile waits for the connect): the read after it decides
		// every trigger. The child the connect starts may die before it
		// returns, and the session it makes may predate a network change.
		s.trig = r.trig
	case cur.Status == opencode.StatusPending:
		// OpenCode's own start may make its session before the network
		// changed: the read after it decides the network's trigger.
		s.trig = r.trig & (trigNetwork | trigRenew)
	}
	if cur.Status != opencode.StatusPending {
		s.pending = nil
	}
	r.confirmed = s.confirm && !s.connecting
	if r.confirmed {
		s.confirm = false
	}
	return r
}

// reconcileConnected decides for a connected server: an attempt of ours
// that shows here brought it back (announced: OpenCode says nothing), one
// that stayed up long enough ends its episode, and a trigger may still
// ask for a fresh session (its process exited, the network changed or
// the machine slept, its endpoint restarted), each at most when its
// episode allows. Caller holds Engine.mu.
func (e *Engine) reconcileConnected(d *dir, r read, now time.Time) (o outcome) {
	s, name, p := r.s, r.name, e.cfg.Backoff
	s.rateLimited = false
	if s.connecting {
		return o
	}
	if r.confirmed {
		s.lastReconnect = now
		e.metrics.Reconnects.Inc()
		e.log.Info("reconnected MCP server", "url", e.url, "directory", d.path, "server", name, "attempts", s.ep.NumRequeues())
		o.evs = append(o.evs, Event{Time: now, Type: EventReconnected, Directory: d.path, Server: name, Attempt: s.ep.NumRequeues()})
	}
	switch {
	case s.ep == nil:
	case s.ep.NumRequeues() > 0 && s.ep.Stable(now, e.cfg.StableAfter):
		s.forget() // stayed connected long enough: the episode is over
	case s.ep.Spent(p, now):
		s.forget() // nothing counts any more (a reconnect or a refund took it back)
	}
	if r.trig&trigDead != 0 {
		if c, ok := e.deadChild(d, s, name, now); ok {
			o.connect = &c
			return o
		}
		o.next = s.ep.Next()
	}
	if d.config.remote(name) != "" {
		fire, at := s.fire(r.trig&trigRenew, p, now)
		if fire {
			// The network changed, or the machine slept: OpenCode may
			// hold a session whose connection is dead, and nothing says
			// so until a tool call fails.
			e.log.Info("network changed; reconnecting a remote MCP server for a fresh session", "url", e.url, "directory", d.path, "server", name)
			o.connect = &attempt{name, backoff.Network, trigRenew}
			return o
		}
		o.next = earlier(o.next, at)
	}
	if fire, at := s.fire(r.trig&trigRestart, p, now); fire {
		// Its endpoint restarted: OpenCode holds a dead session. A
		// connect gives it a fresh one without passing through disabled
		// (docs/opencode.md#connect-re-enables-and-reconnects).
		e.log.Info("remote MCP server restarted behind OpenCode's back; reconnecting for a fresh session", "url", e.url, "directory", d.path, "server", name)
		o.connect = &attempt{name, backoff.Extra, trigRestart}
	} else {
		o.next = earlier(o.next, at)
	}
	return o
}

// reconcileFailed decides for a failed server, the only status retried
// (rule 1): unless a connect of it is in flight, the read settles what a
// rate-limited attempt meant, then the schedule's attempt if due, else a
// network change's or a probe's if its episode allows one now, else when
// to look again. Caller holds Engine.mu.
func (e *Engine) reconcileFailed(d *dir, r read, now time.Time) (o outcome) {
	s, name, p := r.s, r.name, e.cfg.Backoff
	s.endWatch()
	if s.connecting {
		return o
	}
	if ev, ok := e.settleRateLimit(d, r, now); ok {
		o.evs = append(o.evs, ev)
	}
	// A give-up is told when a read shows the last fast attempt failed,
	// never before its outcome is known: one that brought the server
	// back gives up nothing.
	if ev, ok := e.gaveUp(d, s, name, now); ok {
		o.evs = append(o.evs, ev)
	}
	if s.ep.Allow(p, now, backoff.Scheduled) {
		o.connect = &attempt{name, backoff.Scheduled, 0}
		return o
	}
	o.next = s.ep.Next()
	if fire, at := s.fire(r.trig&(trigNetwork|trigRenew), p, now); fire {
		o.connect = &attempt{name, backoff.Network, trigNetwork}
	} else if fire, at2 := s.fire(r.trig&trigProbe, p, now); fire {
		o.connect = &attempt{name, backoff.Extra, trigProbe}
	} else {
		o.next = earlier(o.next, earlier(at, at2))
	}
	return o
}

// settleRateLimit decides what the failed server's read says of its
// endpoint's 429: an attempt of ours answered so is refunded (backing_off
// is told), and a failure read after a rate-limited one ends that (the
// give-up its attempt left to this read is told). It returns the event
// to publish, if any. Caller holds Engine.mu.
func (e *Engine) settleRateLimit(d *dir, r read, now time.Time) (Event, bool) {
	s, name, p := r.s, r.name, e.cfg.Backoff
	// Only a remote server's endpoint answers HTTP: a local server's
	// error naming a 429 is its own text, a failure.
	limited := r.cur.RateLimited && d.config[name].kind == "remote"
	switch {
	case r.confirmed && limited:
		// Our attempt was answered 429 (OpenCode 2 says so only in the
		// error, and keeps a cooldown for the endpoint): the server asks
		// for time and did not fail. The attempt does not count, and the
		// next waits (how long, nothing says: see backoff.Policy.Hold).
		s.rateLimited = true
		held := s.episode().Refund(p, 0, rand.Float64())
		if ph := s.ep.Phase(p); ph != backoff.Slow && ph != backoff.Stopped {
			s.slowTold = false // a give-up told for this attempt was wrong
		}
		e.log.Debug("MCP server rate limited; the attempt does not count", "url", e.url, "directory", d.path, "server", name, "next", held)
		return Event{Time: now, Type: EventBackingOff, Directory: d.path, Server: name, Attempt: s.ep.NumRequeues(),
			Tier: tierOf(s.ep.Phase(p)), Next: &held, Reason: ReasonRateLimited, Error: r.cur.Error}, true
	case !limited:
		after := r.confirmed && s.rateLimited
		s.rateLimited = false
		if after {
			// The attempt's return left its give-up to this read (the one
			// before was rate limited): it failed, and counts.
			return e.gaveUp(d, s, name, now)
		}
	}
	return Event{}, false
}

// reconcilePending decides for a pending server (2.x): OpenCode is making
// an attempt of its own (a location boot) or ours. Never connect it; look
// again soon, then less and less often (a start can take 70 s before 2.x
// gives up on it, and a stuck one must not cost a read a second for
// ever). Caller holds Engine.mu.
func (e *Engine) reconcilePending(d *dir, r read, now time.Time) (o outcome) {
	s, name, p := r.s, r.name, e.cfg.Backoff
	if s.connecting {
		return o
	}
	if s.pending == nil {
		s.pending = &pendingRun{since: now}
	}
	run := s.pending
	run.reads++
	o.next = now.Add(p.Base(run.reads))
	if now.Sub(run.since) > PendingStuckAfter && !run.stuckTold {
		// 2.x gives up on a start after its startup and catalog
		// timeouts; past them (and a margin) the start is stuck, and
		// only the user (or a restart) can tell why.
		run.stuckTold = true
		e.log.Warn("MCP server start looks stuck", "url", e.url, "directory", d.path, "server", name, "pending_for", now.Sub(run.since).Round(time.Second))
		o.evs = append(o.evs, Event{Time: now, Type: EventNeedsUserInput, Directory: d.path, Server: name, Reason: stuckHint(now.Sub(run.since))})
	}
	return o
}

// reconcileLeftAlone decides for every other status. Rule 1: only failed
// is retried. disabled is the user's choice; needs_auth and
// needs_client_registration need the user (told once per change, with
// opencode.UserHint's fix); unknown states are left alone, and said once
// per change too.
// The episode ends. Caller holds Engine.mu.
func (e *Engine) reconcileLeftAlone(d *dir, r read, now time.Time) (o outcome) {
	s, name, status := r.s, r.name, r.cur.Status
	s.rateLimited = false
	if h := opencode.UserHint(status, name); h != "" && r.prev != status {
		e.log.Warn("MCP server needs the user", "url", e.url, "directory", d.path, "server", name, "status", status, "hint", h)
		o.evs = append(o.evs, Event{Time: now, Type: EventNeedsUserInput, Directory: d.path, Server: name, Reason: h})
	}
	if !opencode.KnownStatus(status) && r.prev != status {
		e.log.Warn("MCP server in a status this daemon does not know; leaving it alone", "url", e.url, "directory", d.path, "server", name, "status", status)
	}
	s.forget()
	s.endWatch()
	s.stopProbes()
	return o
}
