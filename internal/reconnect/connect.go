package reconnect

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// Connects: each within the budget (a slot taken, or handed to the
// directory while it waited in line), charged to the server's episode, and
// followed by a check at the server's next scheduled attempt.

// connect sends the connects a reconcile decided on, each with a budget
// slot. A server that finds none is not charged: the directory waits in
// line, and the slot it is handed makes it due again, so the connect is
// decided anew from a fresh read.
func (e *Engine) connect(ctx context.Context, d *dir, connects []attempt, work *sync.WaitGroup) {
	if len(connects) == 0 {
		return
	}
	now := time.Now()
	p := e.cfg.Backoff
	var evs []Event
	e.mu.Lock()
	for _, a := range connects {
		s := d.servers[a.name]
		if s == nil || s.connecting {
			continue
		}
		remote := d.config[a.name].kind == "remote"
		if !e.takeSlot(d, remote) {
			s.slotWait = true
			s.trig |= a.trig // still wanted when the slot comes, for the same reason
			continue
		}
		next := s.episode().Attempt(p, now, a.trigger, rand.Float64())
		if s.ep.Phase(p) == backoff.Slow {
			// Slow-tier attempts are idle work: batch them like idle checks.
			s.ep.Postpone(e.onGrid(next))
		}
		s.connecting, s.confirm, s.lastConnect = true, true, now
		if e.procs != nil {
			s.connectClock = e.procs.Clock()
		}
		e.metrics.Attempts.Inc()
		e.metrics.InFlightConnects.Inc()
		tier := tierOf(s.ep.Phase(p))
		e.log.Debug("connecting MCP server", "url", e.url, "directory", d.path, "server", a.name, "attempt", s.ep.NumRequeues(), "tier", tier)
		evs = append(evs, Event{Time: now, Type: EventAttempt, Directory: d.path, Server: a.name, Attempt: s.ep.NumRequeues(), Tier: tier, Error: s.err})
		work.Add(1)
		go func(name string) {
			defer work.Done()
			err := e.oc.Connect(ctx, d.path, name)
			e.budget.Release(remote)
			e.metrics.InFlightConnects.Dec()
			e.post(d, func() { e.finishConnect(d, name, err) })
		}(a.name)
	}
	e.mu.Unlock()
	e.publish(evs...)
}

// takeSlot takes a budget slot for a connect of this kind: one handed to
// the directory while it waited, or a free one. Failing both, the
// directory waits in line. Caller holds Engine.mu.
func (e *Engine) takeSlot(d *dir, remote bool) bool {
	k := 0 // d.held and d.waiting's index: 1 for remote
	if remote {
		k = 1
	}
	if d.held[k] > 0 {
		d.held[k]--
		return true
	}
	if d.waiting[k] != nil {
		return false // in line already
	}
	// Wait takes a free slot, or queues; it never runs the grant here,
	// under Engine.mu.
	granted, cancel := e.budget.Wait(remote, func() { e.granted(d, k) })
	if granted {
		return true
	}
	d.waiting[k] = cancel
	return false
}

// granted runs when the budget hands the waiting directory a slot: the
// directory owns it and is due now.
func (e *Engine) granted(d *dir, k int) {
	e.mu.Lock()
	if d.loopEnded {
		e.mu.Unlock()
		e.budget.Release(k == 1)
		return
	}
	d.waiting[k] = nil
	d.held[k]++
	d.wakeBy(time.Now())
	e.mu.Unlock()
}

// releaseHeld gives back the slots a check did not use.
func (e *Engine) releaseHeld(d *dir) {
	e.mu.Lock()
	held := d.held
	d.held = [2]int{}
	e.mu.Unlock()
	for k, n := range held {
		for range n {
			e.budget.Release(k == 1)
		}
	}
}

// finishConnect schedules the read of the outcome of a server's connect
// that returned err, and its next attempt. The call returns when its
// attempt is over, so OpenCode says then whether the server came back,
// and status must not show failed for seconds after OpenCode said
// connected: the outcome is read announceGrace later (a disposal that
// answered the connect is announced meanwhile). The read connects
// nothing the schedule does not allow.
func (e *Engine) finishConnect(d *dir, name string, err error) {
	now := time.Now()
	var evs []Event
	e.mu.Lock()
	s := d.servers[name]
	if s == nil {
		e.mu.Unlock()
		return
	}
	s.connecting = false
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
