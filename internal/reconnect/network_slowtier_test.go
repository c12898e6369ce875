package reconnect

import (
	"testing"
	"time"
)

// SPEC rule 5: in the slow tier, attempts caused by a network change come
// at most once per max-delay. A change soon after the server dropped to
// the slow tier (its last attempt under a second ago, and no network-triggered
// attempt yet, so the network limit of its own says nothing) waits until
// max-delay after that last attempt; a storm of changes after it buys one
// attempt per max-delay.
func TestNetworkChangeInSlowTierWaitsForMaxDelay(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		// Step to the moment the fast episode is spent, whatever its
		// schedule.
		for sec := 1; ; sec++ {
			r.at(time.Duration(sec) * time.Second)
			if n := len(r.connectTimes(dirA, "f")); n > 0 && r.server(dirA, "f").Tier == TierSlow {
				break
			}
			if sec > 120 {
				t.Fatal("not in the slow tier after two minutes")
			}
		}
		fast := r.connectTimes(dirA, "f")
		last := fast[len(fast)-1]
		r.eng.NetworkChanged()
		r.at(last + 30*time.Second - time.Millisecond)
		if got := r.connectTimes(dirA, "f"); len(got) != len(fast) {
			t.Fatalf("connects = %v: a network change in the slow tier came within max-delay of the last attempt (%v)", got, last)
		}
		r.at(last + 30*time.Second + time.Millisecond)
		got := r.connectTimes(dirA, "f")
		if len(got) != len(fast)+1 || got[len(fast)] != last+30*time.Second {
			t.Fatalf("connects = %v, want one more at %v (max-delay after the last)", got, last+30*time.Second)
		}
		// Ten minutes of changes: one attempt per max-delay at most.
		start := time.Since(r.start)
		for i := range 1000 {
			r.eng.NetworkChanged()
			r.at(start + time.Duration(i)*600*time.Millisecond)
		}
		if n := len(r.connectTimes(dirA, "f")) - len(got); n > 20+1 {
			t.Fatalf("%d connects in ten minutes of network changes in the slow tier, want at most one per max-delay", n)
		}
	})
}
