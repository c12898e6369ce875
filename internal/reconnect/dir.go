// dir.go holds one armed directory's memory (dir, and a server in it) and
// its schedule: when its next check is due, the triggers that ask for an
// attempt outside the schedule, and the snapshot status shows of it.

package reconnect

import (
	"context"
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
	trigNetwork             // the machine's network changed (or it woke from sleep): a failed server may answer
	trigDead                // the process serving a local server exited (processes.go)
	trigRenew               // the way out moved or the machine slept: a held session may be dead
)

// dir is one armed directory. Its fields are guarded by Engine.mu; only
// its turn in the engine's queue (queue.go) reads status and starts
// connects for it.
type dir struct {
	// order is reconcile's buffer of the read's server names.
	order   []string
	path    string
	armedBy string
	armedAt time.Time
	// byEvent is set when OpenCode's events armed it (activity, a
	// server's change), not the user (reconnect, Arm; one the user named
	// is the user's whatever armed it: Engine.named); lastEvent is when
	// the last event about it arrived.
	byEvent   bool
	lastEvent time.Time
	cancel    context.CancelFunc

	// ctx is the directory's: it ends when it is disarmed. q is the
	// engine's queue, nil for a directory no engine armed (tests).
	ctx context.Context
	q   *queue

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
	// stopping): no check runs before it, whatever asks (holdLocked).
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
	// config is what GET /config said of its servers (config.go), shared
	// with the directories configured alike; nil until read.
	config dirConfig
	// readStart is when the last status read was sent: process evidence
	// counts only against a read sent after it.
	readStart time.Time
	// netTrig: the triggers of the network changes since the last read,
	// set on every server it lists, also those the directory did not
	// know yet (NetworkChanged, InterfacesChanged).
	netTrig int
	// kindsKnown is set once GET /config answered; a failed read, or a
	// server it did not list, clears it so the next check asks again.
	kindsKnown bool
	// listFails counts the checks in a row that could not learn whether
	// the location is booted (bootedUnknown), for their backoff.
	listFails int
	// slotKinds are the kinds of budget slot its connects found none of
	// (slotLocal, slotRemote): it waits in the engine's slotLine. slotWoken:
	// the kinds it waited for when a released slot woke it; its turn passes
	// the wake on (slotFreed) when it is over.
	slotKinds uint8
	slotWoken uint8
}

// server is one MCP server in one directory.
type server struct {
	status, err string
	// ep is its backoff episode; nil while healthy (most servers).
	ep         *backoff.Episode
	trig       int  // triggers for the next reconcile
	connecting bool // a connect is in flight
	confirm    bool // an attempt was made whose outcome no read has shown yet
	slowTold   bool // gave_up was announced for this episode
	slotWait   bool // a due attempt waits for a budget slot
	// returned: its connect returned result, which the directory's next
	// turn reads (finishConnect).
	returned bool
	result   error
	// rateLimited: the last attempt's outcome was the server's 429 (or
	// OpenCode 2's cooldown after one), so it was refunded; cleared by a
	// read that shows anything else.
	rateLimited bool
	// pending is set while reads show it pending (2.x).
	pending       *pendingRun
	lastReconnect time.Time

	// connectClock is the process view's clock (ProcessView.Clock) when
	// the engine last connected it (zero: never, or no view): a child
	// born before that reading was replaced by that connect.
	connectClock uint64

	// What the engine watches of a remote server's endpoint (probes.go):
	// the reachability probes of a failed one, the restart watch of a
	// connected one. Each is the subscription's stop, nil when none runs;
	// the hub's word counts only from the current one.
	probes, watch *func()
	// dead is the last exit of its process (processes.go), allocated
	// when there is one: most of ten thousand servers are connected locals.
	dead *deadChild
}

// pendingRun is a run of reads that showed a server pending: reads counts
// them, spacing the re-checks of a start that takes long; since is when
// the first was read, stuckTold whether the start was reported stuck.
type pendingRun struct {
	reads     int
	since     time.Time
	stuckTold bool
}

// deadChild is the evidence the process view gave of a local server's
// process: at is when it saw the child exit (trigDead), birth when that
// child was born (on the view's clock: a child serving the server born
// later is its successor).
type deadChild struct {
	at    time.Time
	birth uint64
}

func newDir(path, reason string, now time.Time, cancel context.CancelFunc) *dir {
	return &dir{
		path: path, armedBy: reason, armedAt: now, cancel: cancel,
		servers:      map[string]*server{},
		lastActivity: now,
	}
}

// episode returns s's episode, made when it begins.
func (s *server) episode() *backoff.Episode {
	if s.ep == nil {
		s.ep = &backoff.Episode{}
	}
	return s.ep
}

// forget ends the server's episode.
func (s *server) forget() {
	s.ep = nil
	s.slowTold = false
}

// endWatch ends the restart watch of s's endpoint, if one runs.
func (s *server) endWatch() {
	if s.watch != nil {
		(*s.watch)()
		s.watch = nil
	}
}

// stopProbes ends the probes of s's endpoint, if they run.
func (s *server) stopProbes() {
	if s.probes != nil {
		(*s.probes)()
		s.probes = nil
	}
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
		if d.q != nil && d.ctx.Err() == nil {
			d.q.addAt(d.path, d.dueAt())
		}
	}
}

// dueAt is when the next check runs: next, but not before a hold;
// zero when none is asked for. Caller holds Engine.mu.
func (d *dir) dueAt() time.Time {
	if d.next.IsZero() {
		return time.Time{}
	}
	return backoff.Later(d.next, d.hold)
}

// fire decides a trigger the last read left standing: whether it causes an
// attempt now and, if not yet (the episode allows it only later), when to
// look again, keeping the trigger until then. A trigger the episode never
// allows (stopped) is dropped. Caller holds Engine.mu.
func (s *server) fire(trig int, p backoff.Policy, now time.Time) (fire bool, at time.Time) {
	if trig == 0 || s.connecting {
		return false, time.Time{}
	}
	t := backoff.Extra
	if trig&(trigNetwork|trigRenew) != 0 {
		t = backoff.Network
	}
	at, ok := s.ep.NextAllowed(p, t)
	if !ok || !now.Before(at) {
		return ok, time.Time{} // never allowed, or allowed now
	}
	s.trig |= trig
	return false, at
}

// snapshot copies d for status; named: the user named it, whatever armed
// it (Engine.named).
func (d *dir) snapshot(p backoff.Policy, named bool) DirSnapshot {
	ds := DirSnapshot{Directory: d.path, ArmedBy: d.armedBy, ArmedAt: d.armedAt, LastCheck: d.lastCheck,
		NextCheck: d.next, LastError: d.lastErr, Servers: []ServerSnapshot{}}
	if named {
		ds.ArmedBy = ArmedByFlag
	}
	for _, name := range opencode.Names(d.servers) {
		s := d.servers[name]
		ss := ServerSnapshot{Name: name, Status: s.status, Error: s.err, Attempts: s.ep.NumRequeues(), Connecting: s.connecting,
			WaitingForSlot: s.slotWait, NextAttempt: s.ep.Next(), LastAttempt: s.ep.Last(), LastReconnect: s.lastReconnect,
			Hint: opencode.UserHint(s.status, name), RateLimited: s.rateLimited && s.status == opencode.StatusFailed}
		if s.status == opencode.StatusPending && s.pending != nil && s.pending.stuckTold {
			ss.Hint = stuckHint(time.Since(s.pending.since))
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
