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
	e.Forget()
	if e.Phase(p) != Healthy || e.NumRequeues() != 0 || !e.Last().IsZero() {
		t.Fatal("Forget must make the episode healthy")
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
