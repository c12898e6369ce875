// check.go holds a directory's check (is the location still booted, learn
// the server kinds, read status, reconcile, start what the reconcile
// decided), and what a read that brings no news leads to. When a check
// runs is the queue's (queue.go).

package reconnect

import (
	"context"
	"errors"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// A check of one directory, the engine's only way to act:
//
//	read GET /mcp ──► reconcile: fold the read into each server's episode
//	                  and decide, from this read alone, which failed
//	                  servers to connect and when to look again
//	              ──► learn server kinds from GET /config when unknown
//	              ──► probes and endpoint watches for remote servers
//	              ──► connect, each within the budget (or wait in the slot
//	                  line: a released slot makes the directory due again)
//
// Whatever else wants a connect only sets a trigger on a server and makes
// the directory due; the next check decides from its own fresh read.

// check is one reconcile of the directory (see the top of this file), on
// the worker that holds its key (its check slot).
func (e *Engine) check(ctx context.Context, d *dir) {
	e.mu.Lock()
	d.next, d.checking = time.Time{}, time.Now() // the check's time starts with its slot
	learn := !d.kindsKnown && !d.unauthorized    // a refused password refuses this too
	byEvent, lastEvent := d.byEvent && !e.named[d.path], d.lastEvent
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		d.checking = time.Time{}
	}()
	if byEvent {
		// A directory armed by OpenCode's events, not by the user, is
		// read only while OpenCode still has it booted (locations.go):
		// reading would boot it again.
		answered := e.waitOpenCode(d)
		booted, known, err := e.booted(ctx, d.path, lastEvent)
		answered()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			e.bootedUnknown(d, err)
			return
		}
		e.mu.Lock()
		d.listFails = 0
		e.mu.Unlock()
		if known && !booted {
			e.log.Info("location no longer booted in opencode; forgetting it until it is used again", "url", e.url, "directory", d.path)
			e.instanceGone(d.path, "location gone")
			return
		}
	}
	if learn {
		// Before the status read: nothing may come between the read that
		// decides a connect and the connect (a slow config read would
		// leave the decision seconds old).
		e.learnKinds(ctx, d)
	}

	e.metrics.StatusReads.Inc()
	sent := time.Now()
	answered := e.waitOpenCode(d)
	st, err := e.oc.MCPStatus(ctx, d.path)
	answered()
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	if err != nil {
		e.unreadable(d, err, now)
		return
	}
	e.successors(d, st)
	e.mu.Lock()
	d.lastCheck, d.lastErr, d.unauthorized, d.readStart = now, "", false, sent
	connects, evs := e.reconcile(d, st, now)
	e.endpoints(ctx, d)
	pv, look := e.procs, d.localsChanged
	d.localsChanged = false
	e.mu.Unlock()
	if look && pv != nil {
		pv.Look() // a local server came or went: so may its process
	}
	e.publish(evs...)
	e.connect(ctx, d, connects)
}

// waitOpenCode marks d's check as waiting for an answer of OpenCode until
// the returned func is called, which counts the answer as the check's
// progress (Alive).
func (e *Engine) waitOpenCode(d *dir) (answered func()) {
	e.mu.Lock()
	d.awaiting = time.Now()
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		d.awaiting, d.checking = time.Time{}, time.Now() // within the check: it ends after the answer
	}
}

// unreadable handles a status read that failed (rule 9: no news; keep
// every counter and look again after the idle interval), unless OpenCode
// refused the connection: then the server told the engine before the read
// returned (OpenCodeGone, rule 8), and this directory was forgotten with
// the rest.
func (e *Engine) unreadable(d *dir, err error, now time.Time) {
	e.metrics.StatusReadFailures.Inc()
	if errors.Is(err, opencode.ErrRefused) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	d.lastCheck, d.lastErr = now, err.Error()
	if wait, ok := opencode.RetryAfter(err); ok {
		e.holdLocked(d, err, now, wait)
		return
	}
	if errors.Is(err, opencode.ErrUnauthorized) {
		if !d.unauthorized {
			e.log.Error("opencode refused the credentials", "url", e.url, "directory", d.path, "err", err)
		}
		d.unauthorized = true
	} else {
		e.log.Debug("status unavailable", "url", e.url, "directory", d.path, "err", err)
	}
	d.wakeBy(e.idleAt(now))
}

// holdLocked makes d wait for OpenCode's "not yet" (err, asking for
// wait: it is starting or stopping, or the booted locations cannot be
// known yet): no check of d runs before it is over, whatever wakes d
// meanwhile (an event, a free slot): OpenCode would only say it again.
// Every counter is kept, as for an unreadable read; the check that was
// told returns at once, holding no budget slot meanwhile, and the next
// time is never past due. Caller holds Engine.mu.
func (e *Engine) holdLocked(d *dir, err error, now time.Time, wait time.Duration) {
	d.lastErr = err.Error()
	d.hold = now.Add(max(wait, time.Second))
	e.log.Debug("opencode not ready yet", "url", e.url, "directory", d.path, "err", err, "retry_in", wait)
	d.wakeBy(d.hold)
}

// learnKinds reads the directory's MCP config to tell remote servers (and
// their endpoints) from local ones. A failure leaves the kinds unknown, to
// be asked again at the next check; until then an unknown server is
// budgeted as local and not probed.
func (e *Engine) learnKinds(ctx context.Context, d *dir) {
	answered := e.waitOpenCode(d)
	cfg, err := e.oc.MCPConfig(ctx, d.path)
	answered()
	if err != nil {
		e.log.Debug("config unavailable", "url", e.url, "directory", d.path, "err", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.configs.intern(newDirConfig(cfg, d.servers))
	if !sameLocals(d.config, c) {
		e.localsGen++
	}
	d.config = c
	d.kindsKnown = true
	d.localsChanged = true // the view assigns children to these now
}
