package reconnect

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/probe"
)

// dir is one armed directory. Its fields are guarded by Engine.mu; only its
// own loop goroutine reads status and starts connects for it.
type dir struct {
	path    string
	armedBy string
	armedAt time.Time
	cancel  context.CancelFunc
	// wake tells the loop that next moved earlier.
	wake chan struct{}
	// results carries finished connects back to the loop.
	results chan connectResult
	// probes carries finished reachability probes back to the loop.
	probes chan probeResult
	// restarts carries the names of connected remote servers whose
	// endpoint restarted behind OpenCode's back.
	restarts chan string

	// next is the latest time the next status check may run; zero while a
	// check is running and nothing asked for another.
	next         time.Time
	lastActivity time.Time
	lastCheck    time.Time
	lastErr      string
	unauthorized bool
	servers      map[string]*server
	// kinds maps server name → "local", "remote" or "" (unknown), from
	// GET /config, so remote connects use their share of the budget.
	kinds map[string]string
	// urls maps a remote server's name to its endpoint, for probes.
	urls map[string]string
}

// server is one MCP server's episode in one directory.
type server struct {
	status, err   string
	attempts      int
	slow          bool
	stopped       bool // slow-interval 0 and the fast episode is spent
	connecting    bool
	nextAttempt   time.Time // zero: due at the next check
	slotRetry     time.Time // set while waiting for a connect slot
	lastAttempt   time.Time
	lastReconnect time.Time

	// Reachability probes of a failed remote server's endpoint.
	probing   bool
	nextProbe time.Time // zero: not scheduled
	downSince time.Time
	reachable bool // the last probe got through
	// watching is set while a probe.Watch goroutine watches the endpoint
	// of this connected remote server for a restart; stopWatch ends it.
	watching  bool
	stopWatch context.CancelFunc
	// confirmSoon asks for a status check initial-delay after the next
	// connect: it was triggered by a probe, outside the backoff, and the
	// user should not wait an idle interval to see it confirmed.
	confirmSoon bool
}

func (s *server) tier() string {
	switch {
	case s.stopped:
		return TierStopped
	case s.slow:
		return TierSlow
	}
	return TierFast
}

// reset starts a fresh episode.
func (s *server) reset() {
	s.attempts, s.slow, s.stopped = 0, false, false
	s.nextAttempt, s.slotRetry = time.Time{}, time.Time{}
	s.nextProbe, s.downSince, s.reachable = time.Time{}, time.Time{}, false
}

type probeResult struct {
	name string
	err  error
}

type connectResult struct {
	name string
	err  error
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

func (d *dir) snapshot() DirSnapshot {
	ds := DirSnapshot{Directory: d.path, ArmedBy: d.armedBy, ArmedAt: d.armedAt, LastCheck: d.lastCheck,
		NextCheck: d.next, LastError: d.lastErr, Servers: []ServerSnapshot{}}
	for _, name := range opencode.Names(d.servers) {
		s := d.servers[name]
		ss := ServerSnapshot{Name: name, Status: s.status, Error: s.err, Attempts: s.attempts, Connecting: s.connecting,
			NextAttempt: s.nextAttempt, LastAttempt: s.lastAttempt, LastReconnect: s.lastReconnect, Hint: hint(s.status, name)}
		if s.status == opencode.StatusFailed {
			ss.Tier = s.tier()
		}
		ds.Servers = append(ds.Servers, ss)
	}
	return ds
}

// loop is the directory's one goroutine: it sleeps until the next check or
// slot retry, runs it, and collects finished connects. Because only this
// goroutine checks, a wake during a check is honoured after it, never as a
// second check in parallel.
func (e *Engine) loop(ctx context.Context, d *dir) {
	var connects sync.WaitGroup
	defer connects.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		e.mu.Lock()
		at := d.next
		for _, s := range d.servers {
			at = earlier(at, s.slotRetry)
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
			e.restarted(ctx, d, name, &connects)
		case <-timer.C:
			now := time.Now()
			e.mu.Lock()
			due := !d.next.IsZero() && !now.Before(d.next)
			e.mu.Unlock()
			e.startProbes(ctx, d, &connects)
			if due {
				e.check(ctx, d, &connects)
			} else {
				e.retrySlots(ctx, d, &connects)
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

// check is one reconcile of the directory: read status, update every
// server's episode, connect the failed servers that are due, and set the
// time of the next check.
func (e *Engine) check(ctx context.Context, d *dir, connects *sync.WaitGroup) {
	e.mu.Lock()
	d.next = time.Time{}
	e.mu.Unlock()

	e.metrics.StatusReads.Inc()
	st, err := e.oc.MCPStatus(ctx, d.path)
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	e.mu.Lock()
	d.lastCheck = now
	if err != nil {
		// Rule 9: an unreadable status is no news. Keep every counter and
		// look again after the idle interval.
		e.metrics.StatusReadFailures.Inc()
		d.lastErr = err.Error()
		if errors.Is(err, opencode.ErrUnauthorized) {
			if !d.unauthorized {
				e.log.Error("opencode refused the credentials", "url", e.url, "directory", d.path, "err", err)
			}
			d.unauthorized = true
		} else {
			e.log.Debug("status unavailable", "url", e.url, "directory", d.path, "err", err)
		}
		d.next = earlier(d.next, e.idleAt(now))
		e.mu.Unlock()
		return
	}
	d.lastErr, d.unauthorized = "", false
	due, watch, needKinds, evs := e.reconcile(d, st, now)
	e.mu.Unlock()
	e.publish(evs...)

	if len(needKinds) > 0 {
		e.learnKinds(ctx, d, needKinds)
		e.mu.Lock()
		for _, name := range needKinds {
			if s := d.servers[name]; s != nil && s.status == opencode.StatusConnected && d.urls[name] != "" {
				watch = append(watch, name)
			}
		}
		e.mu.Unlock()
	}
	e.startWatches(ctx, d, watch, connects)
	e.startConnects(ctx, d, due, connects)
}

// reconcile folds one status read into the directory's memory and returns
// the failed servers whose attempt is due now, plus events to publish. It
// sets d.next to the earliest due attempt, capped at the idle interval.
// Caller holds Engine.mu.
// Connected remote servers to watch for restarts come back in watch, and
// servers whose kind is not known yet in needKinds.
func (e *Engine) reconcile(d *dir, st map[string]opencode.ServerStatus, now time.Time) (due, watch, needKinds []string, evs []Event) {
	for name := range d.servers {
		if _, ok := st[name]; !ok {
			// Removed from the config: forget it; it starts afresh if it
			// comes back.
			d.servers[name].endWatch()
			delete(d.servers, name)
			delete(d.kinds, name)
			delete(d.urls, name)
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
		if cur.Status != opencode.StatusFailed {
			// Rule 1: only failed is retried. Any other state ends the
			// episode.
			if s.attempts > 0 && cur.Status == opencode.StatusConnected {
				s.lastReconnect = now
				e.metrics.Reconnects.Inc()
				e.log.Info("reconnected MCP server", "url", e.url, "directory", d.path, "server", name, "attempts", s.attempts)
				evs = append(evs, Event{Time: now, Type: EventReconnected, Directory: d.path, Server: name, Attempt: s.attempts})
			}
			if h := hint(cur.Status, name); h != "" && prev != cur.Status {
				e.log.Warn("MCP server needs the user", "url", e.url, "directory", d.path, "server", name, "status", cur.Status, "hint", h)
				evs = append(evs, Event{Time: now, Type: EventNeedsUserInput, Directory: d.path, Server: name, Reason: h})
			}
			s.reset()
			if cur.Status == opencode.StatusConnected && e.prober != nil && !s.watching {
				if _, known := d.kinds[name]; !known {
					needKinds = append(needKinds, name)
				} else if d.urls[name] != "" {
					watch = append(watch, name)
				}
			}
			if cur.Status != opencode.StatusConnected {
				s.endWatch()
			}
			continue
		}
		s.endWatch()
		e.scheduleProbe(d, name, s, now)
		switch {
		case s.connecting, s.stopped:
		case s.slotRetry.After(now):
			// Waiting for a connect slot; retrySlots handles it.
		case s.nextAttempt.IsZero() || !now.Before(s.nextAttempt):
			due = append(due, name)
		default:
			next = earlier(next, s.nextAttempt)
		}
	}
	d.next = earlier(d.next, next)
	for _, name := range due {
		if _, ok := d.kinds[name]; !ok {
			needKinds = append(needKinds, name)
		}
	}
	return due, watch, needKinds, evs
}

// learnKinds reads the directory's MCP config once, to tell remote servers
// from local ones. A failure leaves them unknown (treated as local).
func (e *Engine) learnKinds(ctx context.Context, d *dir, names []string) {
	cfg, err := e.oc.MCPConfig(ctx, d.path)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range names {
		d.kinds[n] = ""
	}
	if err != nil {
		e.log.Debug("config unavailable", "url", e.url, "directory", d.path, "err", err)
		return
	}
	for n, entry := range cfg {
		if _, ok := d.servers[n]; ok {
			d.kinds[n] = entry.Type
			if entry.Type == "remote" && entry.URL != "" {
				d.urls[n] = entry.URL
			}
		}
	}
}

// retrySlots tries again to connect servers that found no free slot. It
// reads no status: their status is at most a slot wait old.
func (e *Engine) retrySlots(ctx context.Context, d *dir, connects *sync.WaitGroup) {
	now := time.Now()
	var due []string
	e.mu.Lock()
	for _, name := range opencode.Names(d.servers) {
		s := d.servers[name]
		if !s.slotRetry.IsZero() && !now.Before(s.slotRetry) {
			s.slotRetry = time.Time{}
			due = append(due, name)
		}
	}
	e.mu.Unlock()
	e.startConnects(ctx, d, due, connects)
}

// startConnects connects each due server that gets a budget slot; the rest
// wait a short jittered while, uncharged.
func (e *Engine) startConnects(ctx context.Context, d *dir, due []string, connects *sync.WaitGroup) {
	if len(due) == 0 {
		return
	}
	now := time.Now()
	var evs []Event
	e.mu.Lock()
	for _, name := range due {
		s := d.servers[name]
		if s == nil || s.connecting {
			continue
		}
		remote := d.kinds[name] == "remote"
		if !e.budget.TryAcquire(remote) {
			s.slotRetry = now.Add(e.slotWait())
			continue
		}
		s.connecting = true
		s.slotRetry = time.Time{}
		s.attempts++
		s.lastAttempt = now
		e.metrics.Attempts.Inc()
		e.metrics.InFlightConnects.Inc()
		e.log.Debug("connecting MCP server", "url", e.url, "directory", d.path, "server", name, "attempt", s.attempts, "tier", s.tier())
		evs = append(evs, Event{Time: now, Type: EventAttempt, Directory: d.path, Server: name, Attempt: s.attempts, Tier: s.tier(), Error: s.err})
		connects.Add(1)
		go func() {
			defer connects.Done()
			err := e.oc.Connect(ctx, d.path, name)
			e.budget.Release(remote)
			e.metrics.InFlightConnects.Dec()
			select {
			case d.results <- connectResult{name: name, err: err}:
			case <-ctx.Done():
			}
		}()
	}
	e.mu.Unlock()
	e.publish(evs...)
}

// finishConnect schedules the re-check of a server whose connect returned:
// its own delay after this attempt, or the slow tier once the fast episode
// is spent.
func (e *Engine) finishConnect(d *dir, r connectResult) {
	now := time.Now()
	var evs []Event
	e.mu.Lock()
	s := d.servers[r.name]
	if s == nil {
		e.mu.Unlock()
		return
	}
	s.connecting = false
	if errors.Is(r.err, opencode.ErrNotFound) {
		// OpenCode no longer knows it: forget it like a removed server.
		delete(d.servers, r.name)
		delete(d.kinds, r.name)
		e.mu.Unlock()
		return
	}
	if r.err != nil {
		e.log.Debug("connect call failed", "url", e.url, "directory", d.path, "server", r.name, "err", r.err)
	}
	p := e.cfg.Backoff
	delay, again := p.After(s.attempts)
	if p.Slow(s.attempts) && !s.slow {
		s.slow = true
		e.metrics.GiveUps.Inc()
		attrs := []any{"url", e.url, "directory", d.path, "server", r.name, "attempts", s.attempts, "error", s.err}
		if again {
			e.log.Info("MCP server still failing; retrying slowly", append(attrs, "every", p.SlowInterval)...)
		} else {
			e.log.Info("MCP server still failing; giving up until it is seen healthy or reconnect is asked", attrs...)
		}
		evs = append(evs, Event{Time: now, Type: EventGaveUp, Directory: d.path, Server: r.name, Attempt: s.attempts, Error: s.err})
	}
	if s.confirmSoon {
		s.confirmSoon = false
		d.wakeBy(now.Add(e.wakeDelay()))
	}
	if !again {
		s.stopped = true
		s.nextAttempt = time.Time{}
	} else {
		s.nextAttempt = now.Add(p.Jittered(delay))
		if s.slow {
			// Slow-tier attempts are idle work too: batch them like idle checks.
			s.nextAttempt = e.onGrid(s.nextAttempt)
		}
		next := s.nextAttempt
		evs = append(evs, Event{Time: now, Type: EventBackingOff, Directory: d.path, Server: r.name, Attempt: s.attempts, Tier: s.tier(), Next: &next})
		d.wakeBy(s.nextAttempt)
	}
	e.mu.Unlock()
	e.publish(evs...)
}

// scheduleProbe starts probing a failed remote server's endpoint, so the
// server is connected as soon as it answers again, outside its backoff.
// Caller holds Engine.mu.
func (e *Engine) scheduleProbe(d *dir, name string, s *server, now time.Time) {
	if e.prober == nil || s.probing || !s.nextProbe.IsZero() || d.urls[name] == "" {
		return
	}
	if s.downSince.IsZero() {
		s.downSince = now
	}
	s.nextProbe = now.Add(probe.Interval(0))
}

// startProbes runs the probes that are due, within the global probe rate.
func (e *Engine) startProbes(ctx context.Context, d *dir, wg *sync.WaitGroup) {
	if e.prober == nil {
		return
	}
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range opencode.Names(d.servers) {
		s := d.servers[name]
		if s.probing || s.nextProbe.IsZero() || now.Before(s.nextProbe) {
			continue
		}
		if s.status != opencode.StatusFailed {
			s.nextProbe = time.Time{}
			continue
		}
		url := d.urls[name]
		if _, fresh := e.prober.Recent(url); !fresh {
			// A real dial: within the global rate.
			if !e.prober.Allow() {
				s.nextProbe = now.Add(e.slotWait())
				continue
			}
			e.metrics.Probes.Inc()
		}
		s.probing, s.nextProbe = true, time.Time{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.prober.Shared(ctx, url)
			select {
			case d.probes <- probeResult{name: name, err: err}:
			case <-ctx.Done():
			}
		}()
	}
}

// finishProbe acts on a probe: when a failed server's endpoint answers
// again after it did not, connect it now instead of waiting out its
// backoff (the connect still takes a budget slot and counts as an
// attempt). An endpoint that answers while its server stays failed is
// left to the backoff: only a change from unreachable to reachable is news.
func (e *Engine) finishProbe(d *dir, r probeResult) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := d.servers[r.name]
	if s == nil {
		return
	}
	s.probing = false
	if s.status != opencode.StatusFailed {
		return
	}
	up := r.err == nil
	if up && !s.reachable && !s.connecting {
		e.log.Debug("endpoint reachable again; connecting now", "url", e.url, "directory", d.path, "server", r.name)
		s.nextAttempt, s.slotRetry, s.stopped = time.Time{}, time.Time{}, false
		s.confirmSoon = true
		d.wakeBy(now)
	}
	if !up && s.reachable {
		s.downSince = now
	}
	s.reachable = up
	s.nextProbe = now.Add(probe.Interval(now.Sub(s.downSince)))
}

func (s *server) endWatch() {
	if s.stopWatch != nil {
		s.stopWatch()
		s.stopWatch = nil
	}
	s.watching = false
}

// startWatches starts watching the endpoints of connected remote servers.
func (e *Engine) startWatches(ctx context.Context, d *dir, names []string, wg *sync.WaitGroup) {
	if e.prober == nil || len(names) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range names {
		s := d.servers[name]
		url := d.urls[name]
		if s == nil || s.watching || url == "" || s.status != opencode.StatusConnected {
			continue
		}
		restartedCh, unsubscribe := e.hub.Watch(url)
		wctx, cancel := context.WithCancel(ctx)
		s.watching, s.stopWatch = true, func() { unsubscribe(); cancel() }
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer unsubscribe()
			select {
			case <-restartedCh:
				select {
				case d.restarts <- name:
				case <-wctx.Done():
				}
			case <-wctx.Done():
			}
		}()
	}
}

// restarted repairs a remote server whose endpoint went away and came back
// while OpenCode kept calling it connected: OpenCode's session is gone. A
// connect on a connected remote server gives it a fresh session without
// passing through disabled (see the facts), so that is what it gets.
func (e *Engine) restarted(ctx context.Context, d *dir, name string, wg *sync.WaitGroup) {
	e.mu.Lock()
	s := d.servers[name]
	if s == nil {
		e.mu.Unlock()
		return
	}
	s.watching, s.stopWatch = false, nil
	if s.status != opencode.StatusConnected || s.connecting {
		e.mu.Unlock()
		return
	}
	e.log.Info("remote MCP server restarted behind OpenCode's back; reconnecting for a fresh session", "url", e.url, "directory", d.path, "server", name)
	s.confirmSoon = true
	e.mu.Unlock()
	e.startConnects(ctx, d, []string{name}, wg)
}
