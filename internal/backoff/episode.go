package backoff

import "time"

// Phase is where a server stands in its retry episode.
type Phase int

// The phases of an episode.
const (
	// Healthy: no attempt since the server was last seen stable.
	Healthy Phase = iota
	// Fast: within the fast episode (1, 2, 4, 8, 16 s with the defaults).
	Fast
	// Slow: the fast episode is spent; one attempt every SlowInterval.
	Slow
	// Stopped: the fast episode is spent and SlowInterval is zero: no
	// attempt until the episode is forgotten (the server was seen healthy,
	// or the user asked for a reconnect).
	Stopped
)

// Trigger says what asked for an attempt.
type Trigger int

// The causes of an attempt.
const (
	// Scheduled: the episode's own schedule made the attempt due.
	Scheduled Trigger = iota
	// Extra: something outside the schedule saw a chance (an endpoint
	// answering again, a remote server restarted, a crash seen at once).
	Extra
	// Network: the machine's network changed.
	Network
)

// Episode is one server's retry state, in the manner of client-go's
// workqueue rate limiters: Attempt charges an attempt and says when the
// next one is due (When), NumRequeues counts them, and its holder ends
// the episode by dropping it (Forget). Allow decides whether a trigger outside the schedule may cause
// an attempt now, so every cause of a connect is charged to one limiter.
// The zero value is a healthy server.
type Episode struct {
	n        int
	last     time.Time
	returned time.Time // when the last attempt's call returned
	next     time.Time // zero: due at once (healthy) or never (stopped)
	lastNet  time.Time
	// hold is when the attempts refunded last (Refund) allow the next
	// one, whatever its trigger; zero or past: no hold.
	hold time.Time
	// held counts the attempts refunded in a row, for a hold whose
	// length the answer did not say; refunded is set while the last
	// attempt is a refunded one.
	held     int
	refunded bool
}

// A nil *Episode is a healthy one, as the zero Episode is: its readers
// answer for it (NumRequeues, Last, Next, Stable, Phase, Allow,
// NextAllowed), so a holder of many (one per MCP server) allocates one
// only when an episode begins.
var healthy Episode

func (e *Episode) or() *Episode {
	if e == nil {
		return &healthy
	}
	return e
}

// NumRequeues is the number of attempts in this episode.
func (e *Episode) NumRequeues() int { return e.or().n }

// Last is the time of the episode's last attempt (zero when healthy).
func (e *Episode) Last() time.Time { return e.or().last }

// Next is when the schedule makes the next attempt due; zero when healthy
// (due at once) or stopped (never). After a Refund it is the hold's end.
func (e *Episode) Next() time.Time { return e.or().next }

// Returned records that the last attempt's call returned at now: a
// connect can take a minute (a silent remote URL), and a server is stable
// only once it stayed up that long after its attempt was over.
func (e *Episode) Returned(now time.Time) { e.returned = now }

// Stable reports whether the server, now connected, has stayed so for
// after since its last attempt returned, so its episode may end. A healthy
// episode is stable; one whose attempt has not returned yet is not.
func (e *Episode) Stable(now time.Time, after time.Duration) bool {
	e = e.or()
	if e.n == 0 {
		return true
	}
	if e.returned.Before(e.last) {
		return false // the attempt is still in flight
	}
	return now.Sub(e.returned) >= after
}

// Spent reports whether the episode, at now, decides nothing the zero one
// would not: no attempt counts (a refund took back the last), and no hold
// or network limit lies ahead. Its holder may drop it then.
func (e *Episode) Spent(p Policy, now time.Time) bool {
	e = e.or()
	return e.n == 0 && !now.Before(e.hold) && (e.lastNet.IsZero() || !now.Before(e.lastNet.Add(p.Max)))
}

// Phase is where the episode stands under p.
func (e *Episode) Phase(p Policy) Phase {
	e = e.or()
	switch {
	case e.n == 0:
		return Healthy
	case !p.Slow(e.n):
		return Fast
	case p.SlowInterval > 0:
		return Slow
	}
	return Stopped
}

// Allow reports whether trigger t may cause an attempt at now.
func (e *Episode) Allow(p Policy, now time.Time, t Trigger) bool {
	at, ok := e.NextAllowed(p, t)
	return ok && !now.Before(at)
}

// NextAllowed is the earliest time trigger t may cause an attempt, and
// false when it never may (stopped). A scheduled attempt is allowed when
// it is due. Extra and network attempts jump the schedule, but within
// bounds, so that a flapping endpoint or a noisy network costs a bounded
// number of connects per minute: during the fast episode an extra attempt
// is allowed at once; in the slow tier one p.Max after the last attempt;
// when stopped never. A network change additionally causes at most one
// attempt per p.Max. While a Refund's hold lasts, no trigger may.
func (e *Episode) NextAllowed(p Policy, t Trigger) (time.Time, bool) {
	e = e.or()
	at := e.hold // zero: at once
	switch ph := e.Phase(p); {
	case ph == Stopped:
		return time.Time{}, false
	case (ph == Fast || ph == Slow) && t == Scheduled:
		return Later(e.next, e.hold), true
	case ph == Slow:
		at = Later(at, e.last.Add(p.Max))
	}
	if t == Network && !e.lastNet.IsZero() {
		at = Later(e.lastNet.Add(p.Max), at)
	}
	return at, true
}

// Attempt charges one attempt made at now for trigger t and schedules the
// next: p.After(n) later, jittered with the random number r in [0, 1). It
// returns that next time, or zero when the episode is now stopped (or
// still healthy).
//
// A network attempt of a healthy episode renews the live session of a
// server that never failed (a failed one's first attempt is always due on
// its schedule): a server that never failed is no crash loop, however
// often the network changes, so it counts nothing, and only the network's
// own limit (one per Max) holds it.
func (e *Episode) Attempt(p Policy, now time.Time, t Trigger, r float64) time.Time {
	if t == Network {
		e.lastNet = now
		if e.n == 0 {
			return time.Time{}
		}
	}
	if !e.refunded {
		e.held = 0 // the attempt before this one counted: a new run of refunds
	}
	e.refunded = false
	e.n++
	e.last = now
	e.next = time.Time{}
	if d, again := p.After(e.n); again {
		e.next = now.Add(p.Apply(d, r))
	}
	return e.next
}

// Postpone moves the next scheduled attempt to t if t is later (the engine
// rounds slow-tier attempts onto its idle grid).
func (e *Episode) Postpone(t time.Time) {
	if !e.next.IsZero() && t.After(e.next) {
		e.next = t
	}
}

// Refund takes back the charge of the last attempt, whose answer said
// "not yet" rather than "failed": the server is rate limited, or OpenCode
// is starting or stopping. That is no failure of the server, so the
// episode stands as it did before the attempt (no step towards the slow
// tier), but no attempt of any trigger is allowed before Policy.Hold
// after the answer came (when the attempt's call returned): asked is the
// wait the answer asked for, zero when it did not say (then each refund
// in a row waits longer), and r jitters an unsaid wait. It returns when
// the next attempt is allowed. Call it only after Attempt.
//
// Refund decides what to do (the attempt does not count); the policy
// says how long to wait.
func (e *Episode) Refund(p Policy, asked time.Duration, r float64) time.Time {
	if e.n > 0 {
		e.n--
	}
	e.held++
	e.refunded = true
	e.hold = Later(e.returned, e.last).Add(p.Hold(asked, e.n, e.held, r))
	e.next = e.hold
	return e.hold
}

// Later returns the later of two times.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
