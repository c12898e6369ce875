package reconnect

import (
	"testing"
	"time"
)

// A first crash reported a fraction of a second after one of the
// daemon's own reads is retried at once too, on both generations: the
// report is OpenCode speaking, and the check it causes reads before it
// connects, so there is nothing to wait for. (OpenCode 2's
// mcp.status.changed does not say to what the server changed; a read
// that just booted a location makes such changes too, and they cost at
// most the one read per initial-delay every at-once check is limited to.)
func TestFirstCrashSoonAfterAReadIsRetriedAtOnce(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {AfterConnect: "connected"}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		// Connected and seen so by the first check (1 s); then wait for
		// the first idle read, step by step.
		r.at(25 * time.Second)
		reads := func() (n int, last time.Time) {
			for _, q := range fake.Requests() {
				if q.Route == routeStatus && q.Directory == dirA {
					n, last = n+1, q.Time
				}
			}
			return n, last
		}
		n, _ := reads()
		step := 25 * time.Second
		for m, _ := reads(); m == n; m, _ = reads() {
			if step += 50 * time.Millisecond; step > 2*time.Minute {
				t.Fatal("no idle read")
			}
			r.at(step)
		}
		_, read := reads()
		crash := read.Add(300 * time.Millisecond)
		r.at(crash.Sub(r.start))
		fake.Crash(dirA, "s")
		r.at(crash.Sub(r.start) + 2*time.Second)
		if got := r.connectTimes(dirA, "s"); len(got) != 1 || got[0] != crash.Sub(r.start) {
			t.Fatalf("connects at %v, want one at the crash, %v (0.3 s after the read at %v)", got, crash.Sub(r.start), read.Sub(r.start))
		}
	})
}
