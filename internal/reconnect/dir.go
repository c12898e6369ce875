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

// A check of one directory, the engine's only way to act:
//
//	read GET /mcp ──► reconcile: fold the read into each server's episode
//	                  and decide, from this read alone, which failed
//	                  servers to connect and when to look again
//	              ──► learn server kinds from GET /config when unknown
//	              ──► probes and endpoint watches for remote servers
//	              ──► connect, each within the budget (or wait in line
//	                  for a slot, which makes the directory due again)
//
// Whatever else wants a connect only sets a trigger on a server and makes
// the directory due; the next check decides from its own fresh read.

// Triggers: reasons outside the schedule to consider an attempt. They are
// hints for the next reconcile, which consumes them; each is charged to
// the server's episode (backoff.Episode.Allow).
const (
	trigProbe   = 1 << iota // the endpoint of a failed remote server answers again
	trigRestart             // the endpoint of a connected remote server restarted
	trigNetwork             // the machine's network changed
	trigDead                // the process serving a local server exited (processes.go)
	trigWake                // the machine woke from sleep: a connected remote's session may be dead
)

// dir is one armed directory. Its fields are guarded by Engine.mu; only its
// own loop goroutine reads status and starts connects for it.
type dir struct {
	path    string
	armedBy string
	armedAt time.Time
	// byEvent is set when OpenCode's events armed it (activity, a
	// server's change), not the user (--directory, reconnect); lastEvent
	// is when the last event about it arrived.
	byEvent   bool
	lastEvent time.Time
	cancel    context.CancelFunc
	// wake tells the loop that next moved earlier.
	wake chan struct{}
	// results, probes and restarts carry finished connects, finished
	// probes and endpoint restarts back to the loop.
	results  chan connectResult
	probes   chan probeResult
	restarts chan string

	// next is the latest time the next check may run; zero while a check
	// runs and nothing asked for another. checking is when the check
	// running now began or last had an answer from OpenCode (zero between
	// checks), and awaiting when the call to OpenCode it waits for began
	// (zero when none): Alive tells a hung check from one waiting for a
	// slow OpenCode.
	next     time.Time
	checking time.Time
	awaiting time.Time
	// hold is set while OpenCode said "not yet" (ErrNotYet: starting or
	// stopping): no check runs before it, whatever asks (notYet).
	hold         time.Time
	lastActivity time.Time
	lastAtOnce   time.Time // last check made at once for a first crash
	// localsChanged: a local server's status changed or the config was
	// read since the process view was last told (ProcessView.Look).
	localsChanged bool
	lastCheck     time.Time
	lastErr       string
	unauthorized  bool
	servers       map[string]*server
	// kinds maps server name → "local" or "remote", from GET /config, so
	// remote connects use their share of the budget; urls maps a remote
	// server to its endpoint, for probes and restart watches.
	kinds map[string]string
	urls  map[string]string
	// locals maps a local server to its configured command and cwd, for
	// the process view (processes.go).
	locals map[string]opencode.MCPEntry
	// readStart is when the last status read was sent: process evidence
	// counts only against a read sent after it.
	readStart time.Time
	// kindsKnown is set once GET /config answered; a failed read, or a
	// server it did not list, clears it so the next check asks again.
	kindsKnown bool
	// listFails counts the checks in a row that could not learn whether
	// the location is booted (bootedUnknown), for their backoff.
	listFails int

	// Budget slots handed to this directory while it waited in line
	// (index 1: remote), used by its next check or released after it.
	held      [2]int
	waiting   [2]func() bool // cancels a wait in line; nil when not waiting
	loopEnded bool
}

// server is one MCP server in one directory.
type server struct {
	status, err string
	ep          backoff.Episode
	trig        int  // triggers for the next reconcile
	connecting  bool // a connect is in flight
	confirm     bool // an attempt was made whose outcome no read has shown yet
	slowTold    bool // gave_up was announced for this episode
	slotWait    bool // a due attempt waits for a budget slot
	// rateLimited: the last attempt's outcome was the server's 429 (or
	// OpenCode 2's cooldown after one), so it was refunded; cleared by a
	// read that shows anything else.
	rateLimited bool
	// pendingReads counts consecutive reads that showed it pending (2.x),
	// spacing the re-checks of a start that takes long; pendingSince is
	// when the first of them was read, stuckTold whether the start was
	// reported stuck.
	pendingReads int
	pendingSince time.Time
	stuckTold    bool
	// unknownTold is the unknown status last logged, so each is logged
	// once.
	unknownTold string

	lastReconnect time.Time

	// Reachability probes of a failed remote server's endpoint.
	probing   bool
	nextProbe time.Time // zero: not scheduled
	downSince time.Time
	reachable bool // the last probe got through
	// stopWatch ends the restart watch of a connected remote server's
	// endpoint; nil when not watching.
	stopWatch context.CancelFunc
	// deadAt is when the process view saw the child serving this local
	// server exit (trigDead); lastConnect when the engine last connected
	// it (a child older than that was replaced by it).
	deadAt time.Time
	// deadStart is when the child that exited had started: a child
	// serving the server that started later is its successor.
	deadStart   time.Time
	lastConnect time.Time
}

type connectResult struct {
	name  string
	extra bool // the attempt jumped the schedule
	err   error
}

type probeResult struct {
	name string
	err  error
}

func newDir(path, reason string, now time.Time, cancel context.CancelFunc) *dir {
	return &dir{
		path: path, armedBy: reason, armedAt: now, cancel: cancel,
		wake:     make(chan struct{}, 1),
		results:  make(chan connectResult),
		probes:   make(chan probeResult),
		restarts: make(chan string),
		servers:  map[string]*server{}, kinds: map[string]string{}, urls: map[string]string{}, locals: map[string]opencode.MCPEntry{},
		lastActivity: now,
	}
}

// forget ends the server's episode.
func (s *server) forget() {
	s.ep.Forget()
	s.slowTold = false
}

func (s *server) endWatch() {
	if s.stopWatch != nil {
		s.stopWatch()
		s.stopWatch = nil
	}
}

func (s *server) stopProbes() {
	s.nextProbe, s.downSince, s.reachable = time.Time{}, time.Time{}, false
}

// earlier returns the earlier of two times, where zero means "never".
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// wakeBy makes the next check run no later than t. It never moves an
// already scheduled check later. Caller holds Engine.mu.
func (d *dir) wakeBy(t time.Time) {
	if n := earlier(d.next, t); !n.Equal(d.next) {
		d.next = n
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// dueAt is when the next check runs: next, but not before a hold;
// zero when none is asked for. Caller holds Engine.mu.
func (d *dir) dueAt() time.Time {
	if d.next.IsZero() {
		return time.Time{}
	}
	return later(d.next, d.hold)
}

// trigger sets trig on every server whose last read showed status and
// whose episode ever allows the attempt trig would cause, and returns when
// the earliest of them is allowed (zero when none). Caller holds Engine.mu.
func (d *dir) trigger(status string, trig int, p backoff.Policy, now time.Time) time.Time {
	var first time.Time
	for _, s := range d.servers {
		if s.status != status || s.connecting {
			continue
		}
		if at, ok := s.ep.NextAllowed(p, triggerOf(trig)); ok {
			s.trig |= trig
			first = earlier(first, later(at, now))
		}
	}
	return first
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// fire decides a trigger the last read left standing: whether it causes an
// attempt now and, if not yet (the episode allows it only later), when to
// look again, keeping the trigger until then. A trigger the episode never
// allows (stopped) is dropped. Caller holds Engine.mu.
func (s *server) fire(trig int, p backoff.Policy, now time.Time) (fire bool, at time.Time) {
	if trig == 0 || s.connecting {
		return false, time.Time{}
	}
	at, ok := s.ep.NextAllowed(p, triggerOf(trig))
	switch {
	case !ok:
		return false, time.Time{}
	case !now.Before(at):
		return true, time.Time{}
	}
	s.trig |= trig
	return false, at
}

func triggerOf(trig int) backoff.Trigger {
	if trig&(trigNetwork|trigWake) != 0 {
		return backoff.Network
	}
	return backoff.Extra
}

func (d *dir) snapshot(p backoff.Policy) DirSnapshot {
	ds := DirSnapshot{Directory: d.path, ArmedBy: d.armedBy, ArmedAt: d.armedAt, LastCheck: d.lastCheck,
		NextCheck: d.next, LastError: d.lastErr, Servers: []ServerSnapshot{}}
	for _, name := range opencode.Names(d.servers) {
		s := d.servers[name]
		ss := ServerSnapshot{Name: name, Status: s.status, Error: s.err, Attempts: s.ep.NumRequeues(), Connecting: s.connecting,
			WaitingForSlot: s.slotWait, NextAttempt: s.ep.Next(), LastAttempt: s.ep.Last(), LastReconnect: s.lastReconnect,
			Hint: opencode.UserHint(s.status, name), RateLimited: s.rateLimited && s.status == opencode.StatusFailed}
		if s.status == opencode.StatusPending && s.stuckTold {
			ss.Hint = stuckHint(time.Since(s.pendingSince))
		}
		if s.status == opencode.StatusFailed {
			ss.Tier = tierOf(s.ep.Phase(p))
		}
		ds.Servers = append(ds.Servers, ss)
	}
	return ds
}

func tierOf(ph backoff.Phase) string {
	switch ph {
	case backoff.Slow:
		return TierSlow
	case backoff.Stopped:
		return TierStopped
	}
	return TierFast
}

// loop is the directory's one goroutine: it sleeps until the next check or
// probe, runs it, and collects finished connects, probes and restarts.
// Because only this goroutine checks, a wake during a check is honoured
// after it, never as a second check in parallel.
func (e *Engine) loop(ctx context.Context, d *dir) {
	var work sync.WaitGroup // connects, probes and watches of this directory
	defer e.endLoop(d, &work)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		e.mu.Lock()
		at := d.dueAt()
		for _, s := range d.servers {
			if !s.probing {
				at = earlier(at, s.nextProbe)
			}
		}
		e.mu.Unlock()
		if at.IsZero() {
			at = time.Now().Add(e.cfg.IdleInterval)
		}
		timer.Reset(time.Until(at))
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case r := <-d.results:
			e.finishConnect(d, r)
		case r := <-d.probes:
			e.finishProbe(d, r)
		case name := <-d.restarts:
			e.endpointRestarted(d, name)
		case <-timer.C:
			e.startProbes(ctx, d, &work)
			e.mu.Lock()
			due := !d.next.IsZero() && !time.Now().Before(d.dueAt())
			e.mu.Unlock()
			if due {
				e.check(ctx, d, &work)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// endLoop stops everything the directory started and gives back its
// budget slots.
func (e *Engine) endLoop(d *dir, work *sync.WaitGroup) {
	e.mu.Lock()
	d.loopEnded = true
	for _, s := range d.servers {
		s.endWatch()
	}
	for i, cancel := range d.waiting {
		if cancel != nil {
			cancel() // a grant that raced this sees loopEnded and releases
			d.waiting[i] = nil
		}
	}
	e.mu.Unlock()
	work.Wait()
	e.releaseHeld(d)
}

// check is one reconcile of the directory (see the top of this file).
func (e *Engine) check(ctx context.Context, d *dir, work *sync.WaitGroup) {
	defer e.releaseHeld(d)
	defer func() {
		e.mu.Lock()
		d.checking = time.Time{}
		e.mu.Unlock()
	}()
	e.mu.Lock()
	d.next, d.checking = time.Time{}, time.Now()
	learn := !d.kindsKnown && !d.unauthorized // a refused password refuses this too
	byEvent, lastEvent := d.byEvent, d.lastEvent
	e.mu.Unlock()
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
			e.locationGone(d)
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
	succeeded := e.successors(d, st)
	e.mu.Lock()
	d.lastCheck, d.lastErr, d.unauthorized, d.readStart = now, "", false, sent
	for _, name := range succeeded {
		e.succeeded(d, name)
	}
	connects, needKinds, evs := e.reconcile(d, st, now)
	if needKinds {
		d.kindsKnown = false // a server the config did not list: ask again next check
	}
	watches := e.endpoints(d, now)
	pv, look := e.procs, d.localsChanged
	d.localsChanged = false
	e.mu.Unlock()
	if look && pv != nil {
		pv.Look() // a local server came or went: so may its process
	}
	e.publish(evs...)
	e.startWatches(ctx, d, watches, work)
	e.connect(ctx, d, connects, work)
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
		d.awaiting = time.Time{}
		if !d.checking.IsZero() {
			d.checking = time.Now()
		}
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
	if wait, ok := opencode.RetryAfter(err); ok {
		e.notYet(d, err, now, wait)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	d.lastCheck, d.lastErr = now, err.Error()
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

// notYet ends a check that OpenCode answered "not yet" (it is starting or
// stopping, or the booted locations cannot be known yet): every counter
// is kept, as for an unreadable read, and the next check comes when the
// answer's wait is over, no sooner. The check returns at once: it holds
// no budget slot meanwhile, and its next time is never past due.
func (e *Engine) notYet(d *dir, err error, now time.Time, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d.lastCheck = now
	e.holdLocked(d, err, now, wait)
}

// holdLocked makes d wait for OpenCode's "not yet" (err, asking for
// wait): no check of d runs before it is over, whatever wakes d
// meanwhile (an event, a free slot): OpenCode would only say it again.
// Caller holds Engine.mu.
func (e *Engine) holdLocked(d *dir, err error, now time.Time, wait time.Duration) {
	d.lastErr = err.Error()
	d.hold = now.Add(max(wait, time.Second))
	e.log.Debug("opencode not ready yet", "url", e.url, "directory", d.path, "err", err, "retry_in", wait)
	d.wakeBy(d.hold)
}

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
// whether server kinds must be learned first, the events to publish, and
// (in d.next) when to look again. Caller holds Engine.mu.
func (e *Engine) reconcile(d *dir, st map[string]opencode.ServerStatus, now time.Time) (connects []attempt, needKinds bool, evs []Event) {
	p := e.cfg.Backoff
	for name, s := range d.servers {
		if _, ok := st[name]; !ok {
			// No longer configured: forget it; it starts afresh if it
			// comes back.
			s.endWatch()
			delete(d.servers, name)
			delete(d.kinds, name)
			delete(d.urls, name)
			if _, ok := d.locals[name]; ok {
				delete(d.locals, name)
				e.localsGen++
			}
		}
	}
	next := e.idleAt(now)
	for _, name := range opencode.Names(st) {
		cur := st[name]
		s := d.servers[name]
		if s == nil {
			s = &server{}
			d.servers[name] = s
		}
		prev := s.status
		s.status, s.err = cur.Status, cur.Error
		if _, local := d.locals[name]; local && prev != cur.Status {
			d.localsChanged = true
		}
		trig := s.trig
		s.trig, s.slotWait = 0, false
		if cur.Status != opencode.StatusPending {
			s.pendingReads, s.pendingSince, s.stuckTold = 0, time.Time{}, false
		}
		confirmed := s.confirm && !s.connecting
		if confirmed {
			s.confirm = false
		}
		if _, known := d.kinds[name]; !known && (cur.Status == opencode.StatusFailed || cur.Status == opencode.StatusConnected) {
			needKinds = true
		}

		switch cur.Status {
		case opencode.StatusConnected:
			s.rateLimited = false
			if confirmed {
				s.lastReconnect = now
				e.metrics.Reconnects.Inc()
				e.log.Info("reconnected MCP server", "url", e.url, "directory", d.path, "server", name, "attempts", s.ep.NumRequeues())
				evs = append(evs, Event{Time: now, Type: EventReconnected, Directory: d.path, Server: name, Attempt: s.ep.NumRequeues()})
			}
			if s.ep.NumRequeues() > 0 && s.ep.Stable(now, e.cfg.StableAfter) {
				s.forget() // stayed connected long enough: the episode is over
			}
			if trig&trigDead != 0 {
				if c, ok := e.deadChild(d, s, name, now); ok {
					connects = append(connects, c)
					break
				}
				next = earlier(next, s.ep.Next())
			}
			if fire, at := s.fire(trig&trigWake, p, now); fire {
				// The machine slept: OpenCode may hold a session the
				// remote server dropped meanwhile, and nothing says so.
				e.log.Info("woke from sleep; reconnecting a remote MCP server for a fresh session", "url", e.url, "directory", d.path, "server", name)
				connects = append(connects, attempt{name, backoff.Network, trigWake})
				break
			} else {
				next = earlier(next, at)
			}
			if fire, at := s.fire(trig&trigRestart, p, now); fire {
				// Its endpoint restarted: OpenCode holds a dead session.
				// A connect gives it a fresh one without passing through
				// disabled (docs/opencode.md#connect-re-enables-and-reconnects).
				e.log.Info("remote MCP server restarted behind OpenCode's back; reconnecting for a fresh session", "url", e.url, "directory", d.path, "server", name)
				connects = append(connects, attempt{name, backoff.Extra, trigRestart})
			} else {
				next = earlier(next, at)
			}

		case opencode.StatusFailed:
			s.endWatch()
			if s.connecting {
				break
			}
			// Only a remote server's endpoint answers HTTP: a local
			// server's error naming a 429 is its own text, a failure.
			limited := cur.RateLimited && d.kinds[name] == "remote"
			switch {
			case confirmed && limited:
				// Our attempt was answered 429 (OpenCode 2 says so only
				// in the error, and keeps a cooldown for the endpoint):
				// the server asks for time and did not fail. The attempt
				// does not count, and the next waits (how long, nothing
				// says: see backoff.Policy.Hold).
				s.rateLimited = true
				held := s.ep.Refund(p, 0, rand.Float64())
				if ph := s.ep.Phase(p); ph != backoff.Slow && ph != backoff.Stopped {
					s.slowTold = false // a give-up told for this attempt was wrong
				}
				e.log.Debug("MCP server rate limited; the attempt does not count", "url", e.url, "directory", d.path, "server", name, "next", held)
				evs = append(evs, Event{Time: now, Type: EventBackingOff, Directory: d.path, Server: name, Attempt: s.ep.NumRequeues(),
					Tier: tierOf(s.ep.Phase(p)), Next: &held, Reason: ReasonRateLimited, Error: cur.Error})
			case !limited:
				if confirmed && s.rateLimited {
					// The attempt's return left its give-up to this read
					// (the one before was rate limited): it failed, and
					// counts.
					if ev, ok := e.gaveUp(d, s, name, now); ok {
						evs = append(evs, ev)
					}
				}
				s.rateLimited = false
			}
			if s.ep.Allow(p, now, backoff.Scheduled) {
				connects = append(connects, attempt{name, backoff.Scheduled, 0})
				break
			}
			next = earlier(next, s.ep.Next())
			if fire, at := s.fire(trig&trigNetwork, p, now); fire {
				connects = append(connects, attempt{name, backoff.Network, trigNetwork})
			} else if fire, at2 := s.fire(trig&trigProbe, p, now); fire {
				connects = append(connects, attempt{name, backoff.Extra, trigProbe})
			} else {
				next = earlier(next, earlier(at, at2))
			}

		case opencode.StatusPending:
			// OpenCode 2 is making an attempt of its own (a location boot)
			// or ours: never connect it; look again soon, then less and
			// less often (a start can take 70 s before 2.x gives up on it,
			// and a stuck one must not cost a read a second for ever).
			if !s.connecting {
				if s.pendingReads == 0 {
					s.pendingSince = now
				}
				s.pendingReads++
				next = earlier(next, now.Add(p.Base(s.pendingReads)))
				if now.Sub(s.pendingSince) > PendingStuckAfter && !s.stuckTold {
					// 2.x gives up on a start after its startup and catalog
					// timeouts; past them (and a margin) the start is
					// stuck, and only the user (or a restart) can tell why.
					s.stuckTold = true
					e.log.Warn("MCP server start looks stuck", "url", e.url, "directory", d.path, "server", name, "pending_for", now.Sub(s.pendingSince).Round(time.Second))
					evs = append(evs, Event{Time: now, Type: EventNeedsUserInput, Directory: d.path, Server: name, Reason: stuckHint(now.Sub(s.pendingSince))})
				}
			}

		default:
			s.rateLimited = false
			// Rule 1: only failed is retried. disabled is the user's
			// choice; needs_auth and needs_client_registration need the
			// user; unknown states are left alone, and said once. The
			// episode ends.
			if h := opencode.UserHint(cur.Status, name); h != "" && prev != cur.Status {
				e.log.Warn("MCP server needs the user", "url", e.url, "directory", d.path, "server", name, "status", cur.Status, "hint", h)
				evs = append(evs, Event{Time: now, Type: EventNeedsUserInput, Directory: d.path, Server: name, Reason: h})
			}
			if !opencode.KnownStatus(cur.Status) && s.unknownTold != cur.Status {
				s.unknownTold = cur.Status
				e.log.Warn("MCP server in a status this daemon does not know; leaving it alone", "url", e.url, "directory", d.path, "server", name, "status", cur.Status)
			}
			s.forget()
			s.endWatch()
			s.stopProbes()
		}
	}
	d.next = earlier(d.next, next)
	return connects, needKinds, evs
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
	for n, entry := range cfg {
		d.kinds[n] = entry.Type
		if entry.Type == "remote" && entry.URL != "" {
			d.urls[n] = entry.URL
		} else {
			delete(d.urls, n)
		}
		if entry.Type == "local" && len(entry.Command) > 0 {
			d.locals[n] = entry
		} else {
			delete(d.locals, n)
		}
	}
	for n := range d.servers {
		if _, listed := cfg[n]; !listed {
			// Not in the config (added at run time): treated as local,
			// known, so it does not make every check ask again.
			d.kinds[n] = ""
			delete(d.urls, n)
			delete(d.locals, n)
		}
	}
	d.kindsKnown = true
	e.localsGen++
	d.localsChanged = true // the view assigns children to these now
}
