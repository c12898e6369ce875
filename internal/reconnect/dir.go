// dir.go holds one armed directory's memory (dir, and a server in it) and
// its schedule: when its next check is due, the triggers that ask for an
// attempt outside the schedule, and the snapshot status shows of it.

package reconnect

import (
	"context"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

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
// own step (schedule.go) reads status and starts connects for it.
type dir struct {
	// order is reconcile's buffer of the read's server names.
	order []string
	// queued is when the check began to wait for one of the engine's
	// check slots (maxChecks), zero while it holds one or none runs.
	queued  time.Time
	path    string
	armedBy string
	armedAt time.Time
	// byEvent is set when OpenCode's events armed it (activity, a
	// server's change), not the user (--directory, reconnect); lastEvent
	// is when the last event about it arrived.
	byEvent   bool
	lastEvent time.Time
	cancel    context.CancelFunc

	// The directory's place in the engine's schedule (schedule.go). ctx
	// is the directory's: it ends when it is disarmed; sched is nil for a
	// directory no engine armed (tests). stepAt is when its next step is
	// due, index its place in the heap (-1 while a step runs, or once
	// stopped). running is set while a step (or its end) runs; mail holds
	// the outcomes that step has yet to read. work counts the connects,
	// probes and watches it started, which its end waits for.
	ctx     context.Context
	sched   *scheduler
	stepAt  time.Time
	index   int
	running bool
	stopped bool
	mail    []func()
	work    sync.WaitGroup

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
		index:   -1,
		servers: map[string]*server{}, kinds: map[string]string{}, urls: map[string]string{}, locals: map[string]opencode.MCPEntry{},
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
		d.sched.moved(d)
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
