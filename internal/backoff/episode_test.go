package backoff

import (
	"testing"
	"time"
)

func TestEpisodePhasesFollowThePolicy(t *testing.T) {
	p := Default
	p.Jitter = 0
	var e Episode
	t0 := time.Unix(1000, 0)
	if e.Phase(p) != Healthy || !e.Allow(p, t0, Scheduled) {
		t.Fatal("a new episode is healthy and due at once")
	}
	now := t0
	var got []time.Duration
	for range 6 {
		next := e.Attempt(p, now, Scheduled, 0)
		got = append(got, next.Sub(now))
		now = next
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
	if e.Phase(p) != Slow || e.NumRequeues() != 6 {
		t.Fatalf("phase %v after %d attempts, want slow after 6", e.Phase(p), e.NumRequeues())
	}
}

func TestEpisodeStoppedWithSlowIntervalZero(t *testing.T) {
	p := Default
	p.SlowInterval = 0
	var e Episode
	now := time.Unix(0, 0)
	for range p.FastAttempts {
		now = now.Add(time.Hour)
		e.Attempt(p, now, Scheduled, 0.5)
	}
	if e.Phase(p) != Stopped || !e.Next().IsZero() {
		t.Fatalf("phase %v next %v, want stopped with no next", e.Phase(p), e.Next())
	}
	for _, tr := range []Trigger{Scheduled, Extra, Network} {
		if e.Allow(p, now.Add(24*time.Hour), tr) {
			t.Errorf("stopped episode allowed trigger %d", tr)
		}
	}
}

// Extra attempts jump the schedule in the fast episode, come at most once
// per Max in the slow tier, and network attempts at most once per Max.
func TestEpisodeAllowBoundsExtraAttempts(t *testing.T) {
	p := Default
	var e Episode
	now := time.Unix(0, 0)
	e.Attempt(p, now, Scheduled, 0.5)
	if !e.Allow(p, now, Extra) {
		t.Fatal("fast episode must allow an extra attempt at once")
	}
	for range p.FastAttempts {
		e.Attempt(p, now, Extra, 0.5)
	}
	if e.Phase(p) != Slow {
		t.Fatalf("phase %v, want slow", e.Phase(p))
	}
	if e.Allow(p, now.Add(p.Max-time.Millisecond), Extra) {
		t.Fatal("slow tier allowed an extra attempt within Max of the last")
	}
	if !e.Allow(p, now.Add(p.Max), Extra) {
		t.Fatal("slow tier must allow an extra attempt Max after the last")
	}
	var f Episode
	f.Attempt(p, now, Network, 0.5)
	if f.Allow(p, now.Add(p.Max/2), Network) {
		t.Fatal("a second network attempt within Max was allowed")
	}
	if !f.Allow(p, now.Add(p.Max/2), Extra) {
		t.Fatal("the network limit must not hold back other triggers in the fast episode")
	}
}

// A thousand triggers a second for ten minutes cost a bounded number of
// attempts: the fast episode, then one per Max.
func TestEpisodeThousandTriggersAreBounded(t *testing.T) {
	p := Default
	var e Episode
	start := time.Unix(0, 0)
	n := 0
	for ms := 0; ms < 10*60*1000; ms++ {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		tr := Extra
		if ms%2 == 1 {
			tr = Network
		}
		if e.Allow(p, now, tr) {
			e.Attempt(p, now, tr, 0.5)
			n++
		}
	}
	// 5 fast, then one per 30 s for the rest of ten minutes.
	if n > p.FastAttempts+int(10*time.Minute/p.Max)+1 {
		t.Fatalf("%d attempts in ten minutes of constant triggers", n)
	}
}

// An episode is stable only once its last attempt returned and the server
// stayed up after for the given time.
func TestEpisodeStableCountsFromReturn(t *testing.T) {
	p := Default
	t0 := time.Unix(1000, 0)
	var e Episode
	if !e.Stable(t0, time.Minute) {
		t.Fatal("a healthy episode is not stable")
	}
	e.Attempt(p, t0, Scheduled, 0.5)
	if e.Stable(t0.Add(2*time.Minute), time.Minute) {
		t.Fatal("stable while the attempt has not returned")
	}
	e.Returned(t0.Add(50 * time.Second))
	if e.Stable(t0.Add(109*time.Second), time.Minute) {
		t.Fatal("stable 59 s after the return")
	}
	if !e.Stable(t0.Add(110*time.Second), time.Minute) {
		t.Fatal("not stable 60 s after the return")
	}
}

// A wait the server asked for is waited out whole, within the bounds of
// the schedule: never shorter than Initial, never longer than the slow
// tier's interval (Max when there is no slow tier). A wait it did not say
// doubles with each refund in a row, from Initial, and is never shorter
// than the schedule's own delay at the episode's count; a wait asked for
// in a row grows the same way, and is never shorter than what was asked.
func TestHoldIsTheAskedWaitWithinBounds(t *testing.T) {
	p := Default // 1 s, 30 s, jitter 0.2, 5 fast, 5 min
	for _, r := range []float64{0, 0.5, 0.99} {
		if got := p.Hold(7*time.Second, 4, 1, r); got != 7*time.Second {
			t.Errorf("Hold(7s, r=%v) = %v, want 7s: a wait the server asked for is not jittered, nor lengthened", r, got)
		}
	}
	for asked, want := range map[time.Duration]time.Duration{
		time.Millisecond: time.Second,      // never shorter than --initial-delay
		time.Hour:        5 * time.Minute,  // never longer than --slow-interval
		90 * time.Second: 90 * time.Second, // beyond max-delay: the server's word
	} {
		if got := p.Hold(asked, 0, 1, 0.5); got != want {
			t.Errorf("Hold(%v) = %v, want %v", asked, got, want)
		}
	}
	for inARow, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 9: 256 * time.Second, 10: 5 * time.Minute, 50: 5 * time.Minute} {
		if got := p.Hold(0, 0, inARow, 0.5); got != want {
			t.Errorf("Hold(unsaid, %d in a row) = %v, want %v", inARow, got, want)
		}
	}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 5: 5 * time.Minute, 7: 5 * time.Minute} {
		if got := p.Hold(0, n, 1, 0.5); got != want {
			t.Errorf("Hold(unsaid, after %d attempts) = %v, want the schedule's %v", n, got, want)
		}
	}
	for inARow, want := range map[int]time.Duration{1: 7 * time.Second, 3: 7 * time.Second, 4: 8 * time.Second, 6: 32 * time.Second, 20: 5 * time.Minute} {
		if got := p.Hold(7*time.Second, 0, inARow, 0.5); got != want {
			t.Errorf("Hold(7s, %d in a row) = %v, want %v: answers in a row wait longer, at least what was asked", inARow, got, want)
		}
	}
	if got := p.Hold(0, 0, 3, 0); got != 3200*time.Millisecond {
		t.Errorf("Hold(unsaid, 3 in a row, r=0) = %v, want 4 s jittered down to 3.2 s", got)
	}
	p.SlowInterval = 0
	if got := p.Hold(time.Hour, 0, 1, 0.5); got != p.Max {
		t.Errorf("Hold(1h) without a slow tier = %v, want max-delay %v", got, p.Max)
	}
	if got := p.Hold(0, 5, 1, 0.5); got != time.Second {
		t.Errorf("Hold(unsaid) of a stopped count without a slow tier = %v, want initial-delay", got)
	}
}

// A refunded attempt does not count: the episode stands as before it
// (same number of attempts, same phase), and no trigger may cause an
// attempt before the hold, counted from when the attempt's call returned.
// The attempt after the hold is charged as the one refunded would have
// been.
func TestRefundKeepsTheEpisodeAndHolds(t *testing.T) {
	p := Default
	p.Jitter = 0
	t0 := time.Unix(1000, 0)
	var e Episode
	e.Attempt(p, t0, Scheduled, 0)
	e.Attempt(p, t0.Add(time.Second), Scheduled, 0)
	at := t0.Add(3 * time.Second)
	e.Attempt(p, at, Scheduled, 0) // the third: answered 429 at 3.5 s
	e.Returned(at.Add(500 * time.Millisecond))
	until := e.Refund(p, 7*time.Second, 0.5)
	if want := at.Add(7500 * time.Millisecond); !until.Equal(want) || !e.Next().Equal(want) {
		t.Fatalf("refund holds until %v (next %v), want %v: 7 s after the answer", until, e.Next(), want)
	}
	if e.NumRequeues() != 2 || e.Phase(p) != Fast {
		t.Fatalf("after the refund: %d attempts, %v; want the two before it, fast", e.NumRequeues(), e.Phase(p))
	}
	for _, tr := range []Trigger{Scheduled, Extra, Network} {
		if e.Allow(p, until.Add(-time.Millisecond), tr) {
			t.Errorf("trigger %d allowed during the hold", tr)
		}
		if !e.Allow(p, until, tr) {
			t.Errorf("trigger %d not allowed once the hold is over", tr)
		}
	}
	if next := e.Attempt(p, until, Scheduled, 0); e.NumRequeues() != 3 || !next.Equal(until.Add(4*time.Second)) {
		t.Fatalf("the attempt after the hold: %d attempts, next %v; want the third, 4 s later", e.NumRequeues(), next.Sub(until))
	}
}

// A first attempt refunded leaves a healthy episode that still waits for
// its hold; the fifth refunded does not drop the server to the slow tier.
func TestRefundOfFirstAndLastFastAttempt(t *testing.T) {
	p := Default
	p.Jitter = 0
	now := time.Unix(0, 0)
	var e Episode
	e.Attempt(p, now, Scheduled, 0)
	e.Returned(now)
	e.Refund(p, 0, 0.5)
	if e.Phase(p) != Healthy || e.Allow(p, now.Add(999*time.Millisecond), Scheduled) || !e.Allow(p, now.Add(time.Second), Scheduled) {
		t.Fatalf("a refunded first attempt: %v, or its hold of initial-delay not kept", e.Phase(p))
	}
	for range p.FastAttempts {
		now = now.Add(time.Minute)
		e.Attempt(p, now, Scheduled, 0)
	}
	if e.Phase(p) != Slow {
		t.Fatalf("setup: %v after %d attempts", e.Phase(p), e.NumRequeues())
	}
	e.Returned(now)
	e.Refund(p, 0, 0.5)
	if e.Phase(p) != Fast || e.NumRequeues() != p.FastAttempts-1 {
		t.Fatalf("the fifth attempt refunded: %v with %d attempts, want fast with 4", e.Phase(p), e.NumRequeues())
	}
}

// Refunds in a row wait longer each time when the answer does not say how
// long; an attempt that counted starts the run again (at the schedule's
// delay for the episode's count).
func TestRefundsInARowWaitLonger(t *testing.T) {
	p := Default
	p.Jitter = 0
	now := time.Unix(0, 0)
	var e Episode
	var waits []time.Duration
	for range 4 {
		e.Attempt(p, now, Scheduled, 0)
		e.Returned(now)
		until := e.Refund(p, 0, 0)
		waits = append(waits, until.Sub(now))
		now = until
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("holds of refunds in a row = %v, want %v", waits, want)
		}
	}
	e.Attempt(p, now, Scheduled, 0) // answered: failed, counted
	now = now.Add(time.Second)
	e.Attempt(p, now, Scheduled, 0)
	e.Returned(now)
	if until := e.Refund(p, 0, 0); until.Sub(now) != time.Second {
		t.Fatalf("a refund after a counted attempt holds %v, want the schedule's delay after one attempt again", until.Sub(now))
	}
}

// A nil *Episode answers as the zero Episode does (a healthy server): its
// holders allocate one only when an episode begins.
func TestNilEpisodeIsHealthy(t *testing.T) {
	p := Default
	now := time.Now()
	var nilEp *Episode
	var zero Episode
	if nilEp.NumRequeues() != zero.NumRequeues() || !nilEp.Last().Equal(zero.Last()) || !nilEp.Next().Equal(zero.Next()) ||
		nilEp.Stable(now, time.Minute) != zero.Stable(now, time.Minute) || nilEp.Phase(p) != zero.Phase(p) {
		t.Fatal("a nil episode reads unlike the zero one")
	}
	for _, tr := range []Trigger{Scheduled, Extra, Network} {
		a, aok := nilEp.NextAllowed(p, tr)
		b, bok := zero.NextAllowed(p, tr)
		if !a.Equal(b) || aok != bok || nilEp.Allow(p, now, tr) != zero.Allow(p, now, tr) {
			t.Fatalf("trigger %v: a nil episode allows (%v, %v), the zero one (%v, %v)", tr, a, aok, b, bok)
		}
	}
}

// A network attempt of a healthy episode renews a live session: a server
// that never failed is no crash loop, so it counts nothing, and the
// network's limit alone holds the next one.
func TestNetworkAttemptOfAHealthyEpisodeCountsNothing(t *testing.T) {
	p := Default
	var e Episode
	now := time.Unix(0, 0)
	for i := range 10 {
		at := now.Add(time.Duration(i) * p.Max)
		if !e.Allow(p, at, Network) {
			t.Fatalf("renewal %d, Max after the last, not allowed", i)
		}
		e.Attempt(p, at, Network, 0.5)
		if e.Allow(p, at.Add(p.Max-time.Millisecond), Network) {
			t.Fatalf("renewal %d: another allowed within Max", i)
		}
	}
	if e.Phase(p) != Healthy || e.NumRequeues() != 0 || !e.Stable(now.Add(10*p.Max), time.Hour) {
		t.Fatalf("after ten renewals: phase %v, %d attempts; want healthy, none", e.Phase(p), e.NumRequeues())
	}
	if !e.Allow(p, now.Add(10*p.Max), Scheduled) {
		t.Fatal("a healthy episode's first failure must be tried at once")
	}
}
