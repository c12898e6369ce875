package reconnect

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// Connects: each within the budget, charged to the server's episode, and
// followed by a check at the server's next scheduled attempt.

// connect sends the connects a reconcile decided on, each with a budget
// slot. A server that finds none is not charged: the directory waits for
// a slot to be released (slotFreed), and the connect is decided anew from
// the fresh read that follows.
func (e *Engine) connect(ctx context.Context, d *dir, connects []attempt) {
	if len(connects) == 0 {
		return
	}
	now := time.Now()
	p := e.cfg.Backoff
	var evs []Event
	e.mu.Lock()
	if ctx.Err() != nil {
		e.mu.Unlock()
		return // disarmed during the check
	}
	var missed uint8 // the kinds of slot that were not free
	for _, a := range connects {
		s := d.servers[a.name]
		if s == nil || s.connecting {
			continue
		}
		remote := d.config[a.name].kind == "remote"
		if d.slotWoken == 0 && e.othersWait(d, slotKind(remote)) || !e.budget.TryTake(remote) {
			s.slotWait = true
			missed |= slotKind(remote)
			s.trig |= a.trig // still wanted at the next look, for the same reason
			continue
		}
		next := s.episode().Attempt(p, now, a.trigger, rand.Float64())
		if s.ep.Phase(p) == backoff.Slow {
			// Slow-tier attempts are idle work: batch them like idle checks.
			s.ep.Postpone(e.onGrid(next))
		}
		s.connecting, s.confirm = true, true
		if e.procs != nil {
			s.connectClock = e.procs.Clock()
		}
		e.metrics.Attempts.Inc()
		e.metrics.InFlightConnects.Inc()
		tier := tierOf(s.ep.Phase(p))
		e.log.Debug("connecting MCP server", "url", e.url, "directory", d.path, "server", a.name, "attempt", s.ep.NumRequeues(), "tier", tier)
		evs = append(evs, Event{Time: now, Type: EventAttempt, Directory: d.path, Server: a.name, Attempt: s.ep.NumRequeues(), Tier: tier, Error: s.err})
		e.wg.Go(func() {
			err := e.oc.Connect(ctx, d.path, a.name)
			e.budget.Release(remote)
			e.metrics.InFlightConnects.Dec()
			e.mu.Lock()
			defer e.mu.Unlock()
			if s := d.servers[a.name]; s != nil && e.dirs[d.path] == d {
				s.returned, s.result = true, err
				e.q.add(d.path)
			}
		})
	}
	if missed != 0 && d.slotKinds == 0 {
		e.slotLine = append(e.slotLine, d)
	}
	d.slotKinds = missed // zero: it left the line (slotFreed drops it)
	e.tellWaiting()
	e.mu.Unlock()
	e.publish(evs...)
}

// Kinds of budget slot a directory waits for (dir.slotKinds).
const (
	slotLocal uint8 = 1 << iota
	slotRemote
)

func slotKind(remote bool) uint8 {
	if remote {
		return slotRemote
	}
	return slotLocal
}

// othersWait reports whether directories other than d wait in slotLine
// for this kind of slot, or were woken for one and their turn is not over:
// d queues behind them, first come first served. Caller holds Engine.mu.
func (e *Engine) othersWait(d *dir, kind uint8) bool {
	if kind == slotLocal && e.woken[0] > 0 || kind == slotRemote && e.woken[1] > 0 {
		return true // d is not woken (its caller's condition): another is
	}
	return slices.ContainsFunc(e.slotLine, func(w *dir) bool { return w != d && e.inLine(w)&kind != 0 })
}

// inLine is the kinds of slot w waits for in slotLine: none once it was
// disarmed (its context ended). Caller holds Engine.mu.
func (e *Engine) inLine(w *dir) uint8 {
	if e.dirs[w.path] != w || w.ctx.Err() != nil {
		return 0
	}
	return w.slotKinds
}

// slotFreed wakes the first directory in slotLine that waits for a kind
// of budget slot now free: it is due now, and its check decides afresh.
// It runs after a release, and after each turn of a woken directory, so
// the waiting directories are woken one at a time while a slot fits them.
// Caller holds Engine.mu.
func (e *Engine) slotFreed() {
	var free uint8
	if e.budget.Fits(false) {
		free |= slotLocal
	}
	if e.budget.Fits(true) {
		free |= slotRemote
	}
	woken := free == 0
	e.slotLine = slices.DeleteFunc(e.slotLine, func(d *dir) bool {
		switch {
		case e.inLine(d) == 0:
			return true // no longer waiting
		case woken || d.slotWoken != 0 || d.slotKinds&free == 0:
			return false // a woken one's turn is not over: it keeps its place
		}
		woken = true
		d.slotKinds, d.slotWoken = 0, d.slotKinds
		e.woken[0] += int(d.slotWoken & slotLocal)
		e.woken[1] += int(d.slotWoken&slotRemote) >> 1
		d.wakeBy(time.Now())
		e.q.add(d.path)
		return true
	})
	e.tellWaiting()
}

// tellWaiting tells the budget which kinds of slot this engine's line
// waits for, so that engines are served in the order they came (a woken
// directory keeps its kind's place until its turn is over). Caller holds
// Engine.mu.
func (e *Engine) tellWaiting() {
	var kinds uint8
	for _, d := range e.slotLine {
		kinds |= e.inLine(d)
	}
	if e.woken[0] > 0 {
		kinds |= slotLocal
	}
	if e.woken[1] > 0 {
		kinds |= slotRemote
	}
	e.budget.Waiting(kinds)
}

// unwake ends the wake of d (its turn is over, or it was disarmed).
// Caller holds Engine.mu.
func (e *Engine) unwake(d *dir) {
	e.woken[0] -= int(d.slotWoken & slotLocal)
	e.woken[1] -= int(d.slotWoken&slotRemote) >> 1
	d.slotWoken = 0
}

// finishConnect schedules the read of the outcome of the connect of s
// (named name), which returned s.result, and its next attempt. Only the
// turn of d runs it, so s.returned stays set until it does. The call returns when its
// attempt is over, so OpenCode says then whether the server came back,
// and status must not show failed for seconds after OpenCode said
// connected: the outcome is read announceGrace later (a disposal that
// answered the connect is announced meanwhile). The read connects
// nothing the schedule does not allow.
func (e *Engine) finishConnect(d *dir, name string, s *server) {
	now := time.Now()
	var evs []Event
	e.mu.Lock()
	err := s.result
	s.returned, s.result, s.connecting = false, nil, false
	s.episode().Returned(now) // stable-after counts from here, not from the attempt's start
	if errors.Is(err, opencode.ErrRefused) {
		// OpenCode is gone: the server told the engine before the
		// connect returned (OpenCodeGone), and the directory is forgotten.
		e.mu.Unlock()
		return
	}
	p := e.cfg.Backoff
	if wait, ok := opencode.RetryAfter(err); ok {
		// OpenCode said "not yet" (starting or stopping: 503 with a
		// Retry-After): the attempt reached no MCP server, so it does
		// not count, there is no outcome to confirm, and the directory
		// waits the Retry-After before it is checked again.
		s.confirm = false
		s.episode().Refund(p, wait, rand.Float64())
		e.holdLocked(d, err, now, wait)
		e.mu.Unlock()
		return
	}
	if err != nil {
		// A 404 too is an attempt like any other: only a status read that
		// no longer lists the server forgets it.
		e.log.Debug("connect call failed", "url", e.url, "directory", d.path, "server", name, "err", err)
	}
	ph := s.ep.Phase(p)
	if s.rateLimited {
		// The last attempt was answered 429, and this one most likely
		// too: its outcome (the read) decides whether it counted, so the
		// read comes soon.
		d.wakeBy(now.Add(e.wakeDelay()))
	}
	if next := s.ep.Next(); !next.IsZero() {
		evs = append(evs, Event{Time: now, Type: EventBackingOff, Directory: d.path, Server: name, Attempt: s.ep.NumRequeues(), Tier: tierOf(ph), Next: &next})
		d.wakeBy(next)
	}
	if !s.rateLimited {
		d.wakeBy(now.Add(announceGrace))
	}
	local := d.config.local(name)
	pv := e.procs
	e.mu.Unlock()
	if local && pv != nil {
		pv.Look() // a connect of a local server starts a new process
	}
	e.publish(evs...)
}

// gaveUp announces, once per episode, that a server reached the slow tier
// (or stopped); ok is false when it did not, or was announced already.
// Caller holds Engine.mu.
func (e *Engine) gaveUp(d *dir, s *server, name string, now time.Time) (Event, bool) {
	p := e.cfg.Backoff
	ph := s.ep.Phase(p)
	if ph != backoff.Slow && ph != backoff.Stopped || s.slowTold {
		return Event{}, false
	}
	s.slowTold = true
	e.metrics.GiveUps.Inc()
	attrs := []any{"url", e.url, "directory", d.path, "server", name, "attempts", s.ep.NumRequeues(), "error", s.err}
	if ph == backoff.Slow {
		e.log.Info("MCP server still failing; retrying slowly", append(attrs, "every", p.SlowInterval)...)
	} else {
		e.log.Info("MCP server still failing; giving up until it is seen healthy or reconnect is asked", attrs...)
	}
	return Event{Time: now, Type: EventGaveUp, Directory: d.path, Server: name, Attempt: s.ep.NumRequeues(), Error: s.err}, true
}
