package reconnect

import (
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
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

// Rule 11 says the daemon logs (and publishes gave_up) when it
// gives up on a server. A server that reached the slow tier, was retried
// by the user's `reconnect` (a fresh episode), and failed its whole fast
// episode again is announced as given up a second time: a gave_up event,
// a log line, the give-up metric. (The crash report's first-crash shortcut
// starts a fresh episode the same way.)
func TestGaveUpAnnouncedAgainAfterReconnect(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"broken": {Status: "failed", Error: "Connection closed"}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		r.at(20 * time.Second) // attempts at 1, 2, 4, 8, 16 s: slow tier
		if n := len(r.eventsOf(EventGaveUp)); n != 1 {
			t.Fatalf("gave_up events after the first episode = %d, want 1", n)
		}
		if _, err := r.eng.Reconnect(dirA, nil); err != nil {
			t.Fatal(err)
		}
		r.at(60 * time.Second) // a fresh fast episode of five attempts, all failed
		if got := len(r.connectTimes(dirA, "broken")); got < 10 {
			t.Fatalf("connects = %d, want the second fast episode too", got)
		}
		if n := len(r.eventsOf(EventGaveUp)); n != 2 {
			t.Errorf("gave_up events = %d after a reconnect's fresh episode failed again, want 2", n)
		}
	})
}

// A remote server that answers 429 is not failing: OpenCode 2 reports it
// only in the status entry's error (connect answers 204; no field, header
// or event carries the Retry-After) and keeps a cooldown for the endpoint,
// answering every attempt within it the same without asking the server.
// The engine refunds each such attempt (the episode does not advance: no
// slow tier, no give-up), waits longer after each (the schedule's delay,
// doubling while it lasts), says so in status, and once the server answers
// again the episode goes on where it stood.
func TestRateLimitDoesNotAdvanceTheEpisode(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		const url = "http://r.test/mcp"
		fake := newFake2(map[string]Spec{"r": {Type: "remote", URL: url, Status: "failed", Error: "Connection refused"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(3 * time.Second) // attempts at 1 and 2 s failed and counted
		if s := r.server(dirA, "r"); s.Attempts != 2 || s.RateLimited {
			t.Fatalf("setup: r = %+v, want two attempts", s)
		}
		// From now the endpoint answers 429 (Retry-After: 7) for 20 s,
		// and comes back after.
		fake.RateLimit(url, 20*time.Second, 7*time.Second)
		fake.SetAfterConnect(dirA, "r", "connected")

		r.at(9500 * time.Millisecond)
		s := r.server(dirA, "r")
		if s.Attempts != 2 || s.Tier != TierFast || !s.RateLimited || s.Error != fake2.ErrCooldown {
			t.Fatalf("rate limited: r = %+v; want its two attempts, fast, rate limited", s)
		}
		if want := r.start.Add(12 * time.Second); !s.NextAttempt.Equal(want) {
			t.Fatalf("next attempt at %v, want 12 s", s.NextAttempt.Sub(r.start))
		}
		r.at(19 * time.Second)
		if s := r.server(dirA, "r"); s.Attempts != 2 || !s.RateLimited || s.Tier != TierFast {
			t.Fatalf("rate limited for 16 s: r = %+v; want its two attempts", s)
		}
		if n := len(r.eventsOf(EventGaveUp)); n != 0 {
			t.Fatalf("%d gave_up events for a rate limited server", n)
		}
		limited := 0
		for _, ev := range r.eventsOf(EventBackingOff) {
			if ev.Reason == ReasonRateLimited {
				limited++
			}
		}
		if limited < 4 {
			t.Fatalf("%d backing_off events saying rate limited, want one per refunded attempt", limited)
		}

		r.at(40 * time.Second)
		// 4 s: the third attempt, answered 429, which the read of its
		// outcome shows half a second later; then holds of 2, 2, 4, 8 and 16 s from
		// each answer (the schedule's 2 s after two attempts, then
		// doubling), each within OpenCode's cooldown until it ends (23 s).
		if got, want := r.connectTimes(dirA, "r"), secs(1, 2, 4, 6, 8, 12, 20, 36); !equalDurations(got, want) {
			t.Fatalf("connects = %v, want %v", got, want)
		}
		if s := r.server(dirA, "r"); s.Status != opencode.StatusConnected || s.Attempts != 3 || s.RateLimited {
			t.Fatalf("after the limit: r = %+v; want connected by the third counted attempt", s)
		}
		if n := len(r.eventsOf(EventReconnected)); n != 1 {
			t.Fatalf("%d reconnected events, want 1", n)
		}
	})
}

// OpenCode 1.x keeps no cooldown and has no rate limit to report: a
// failure that names HTTP 429 counts as any failure does.
func TestRateLimitTextOn1xIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := g1().new(map[string]Spec{"r": {Type: "remote", URL: "http://r.test/mcp", Status: "failed",
			Error: "Error POSTing to endpoint (HTTP 429): Too Many Requests"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(time.Minute)
		if got, want := r.connectTimes(dirA, "r"), secs(1, 2, 4, 8, 16); !equalDurations(got, want) {
			t.Fatalf("connects = %v, want the fast episode %v", got, want)
		}
		if s := r.server(dirA, "r"); s.Attempts != 5 || s.Tier != TierSlow || s.RateLimited {
			t.Fatalf("r = %+v; want five attempts, slow", s)
		}
	})
}

// A local server speaks no HTTP to OpenCode: an error of one that reads
// like OpenCode 2's rate limit (its message is the server's own text) is
// a failure like any other, and its episode goes on to the slow tier.
func TestRateLimitTextOfALocalServerIsAFailure(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"l": {Status: "failed", Error: fake2.ErrTooManyRequests}})
		fake.SetAfterConnect(dirA, "l", "failed")
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(time.Minute)
		if got, want := r.connectTimes(dirA, "l"), secs(1, 2, 4, 8, 16); !equalDurations(got, want) {
			t.Fatalf("connects = %v, want the fast episode %v", got, want)
		}
		if s := r.server(dirA, "l"); s.Attempts != 5 || s.Tier != TierSlow || s.RateLimited {
			t.Fatalf("l = %+v; want five attempts, slow, not rate limited", s)
		}
	})
}

// Tests of what only OpenCode 2.x does: a "pending" state, a location boot
// announced by a burst of mcp.status.changed, and eviction of idle
// locations (location.shutdown).

// each2x runs f in a synctest bubble once per OpenCode 2 profile (2.1.2
// and the v2 preview build), as subtests v2 and v2preview; newFake2 makes
// that profile's fake.
func each2x(t *testing.T, f func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2)) {
	for _, g := range generations {
		if !strings.HasPrefix(g.name, "v2") {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f(t, func(specs map[string]Spec) *fakeV2 { return g.new(specs).(*fakeV2) })
			})
		})
	}
}

var _ = fake2.New // the profiles are made through generations

// A server 2.x is still starting ("pending") is never connected, and is
// looked at again soon (initial-delay, doubling), not after the idle
// interval; our
// own connect, pending while it runs, is not doubled by the reads its
// events cause.
func TestPendingIsNeverConnected(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"f": {Status: "failed"}, "ok": {}})
		fake.SetPending(4500 * time.Millisecond) // the boot at 1 s settles at 5.5 s
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(5400 * time.Millisecond)
		if n := fake.Count(routeConnect, "", ""); n != 0 {
			t.Fatalf("%d connects while every server was pending", n)
		}
		// Reads at 1, 2 and 4 s saw pending: re-checked soon, then less
		// and less often (initial-delay doubling).
		if n := fake.Count(routeStatus, dirA, ""); n != 3 {
			t.Fatalf("status reads while pending = %d, want 3 (at 1, 2 and 4 s)", n)
		}
		if s := r.server(dirA, "f"); s.Status != "pending" || s.Attempts != 0 {
			t.Fatalf("f = %+v, want pending, no attempt", s)
		}
		// The outcome (mcp.status.changed at 5.5 s) wakes the directory
		// initial-delay later: f is failed at the 6.5 s check and
		// connected; its attempt runs ("pending") 4.5 s.
		r.at(10400 * time.Millisecond)
		if got := r.connectTimes(dirA, "f"); !equalDurations(got, secs(6.5)) {
			t.Fatalf("connects of f = %v, want one at 6.5s", got)
		}
		if n := fake.Count(routeConnect, dirA, "ok"); n != 0 {
			t.Fatalf("%d connects of a server that came up by itself", n)
		}
	})
}

// A server stuck in "pending" (2.x gives up on a start after its startup
// and catalog timeouts, 70 s by default; facts §4: "stuck only after
// startup + catalog + 10 s") must not cost a status read per
// initial-delay for ever.
func TestStuckPendingIsNotPolledForEver(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"p": {}})
		fake.SetPending(24 * time.Hour)
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(10 * time.Minute)
		// At most one read a second while a start may still be running
		// (70 s), then one per idle interval.
		if n := fake.Count(routeStatus, dirA, ""); n > 70+20+2 {
			t.Fatalf("a server stuck in pending cost %d status reads in 10 minutes", n)
		}
	})
}

// A location boot is a burst of mcp.status.changed (each server: pending,
// then its outcome): the burst our own first read causes costs one more
// check. A burst of changes of connected servers caused by someone else
// (a TUI booting the location, servers crashing) costs two: the first
// change is read at once (it may be a first crash), the rest of the burst
// once more, initial-delay later.
func TestBootBurstCostsTwoChecks(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		specs := map[string]Spec{}
		for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
			specs[n] = Spec{}
		}
		fake := newFake2(specs)
		fake.SetPending(500 * time.Millisecond)
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		fake.Activity(dirA) // arms; the first read (1 s) boots 10 servers
		r.at(31 * time.Second)
		// 1 s: everything pending (20 events follow until 1.5 s); 2 s:
		// everything connected; then idle until 32 s.
		if n := fake.Count(routeStatus, dirA, ""); n != 2 {
			t.Fatalf("status reads for a boot of 10 servers = %d, want 2", n)
		}
		for n := range specs {
			if s := r.server(dirA, n); s.Status != "connected" {
				t.Fatalf("%s = %+v", n, s)
			}
		}
		r.at(40 * time.Second)
		before := fake.Count(routeStatus, dirA, "")
		for i := range 20 {
			fake.ReportCrash(dirA, string(rune('a'+i%10)))
			time.Sleep(25 * time.Millisecond)
		}
		r.at(45 * time.Second)
		if n := fake.Count(routeStatus, dirA, "") - before; n != 2 {
			t.Fatalf("status reads for a burst of 20 mcp.status.changed = %d, want 2", n)
		}
		if n := fake.Count(routeConnect, "", ""); n != 0 {
			t.Fatalf("%d connects", n)
		}
	})
}

// location.shutdown (2.x evicts a location after an hour without session
// activity) disarms it: no request names it again, so the daemon's idle
// reads never boot it again (and start its MCP servers), until a session
// event arms it. A read in flight when it is evicted is abandoned, not
// finished (finishing it would boot the location again).
func TestLocationShutdownDisarms(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"f": {Status: "failed"}, "ok": {}})
		if fake.Profile().NoShutdownEvent {
			t.Skip("no location.shutdown on this build: TestDisposedLocationIsNotBootedAgain and the e2e disposal test cover it")
		}
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		for _, d := range []string{"/a", "/b", "/c"} {
			_ = r.eng.Arm(d, "--directory")
		}
		r.at(5 * time.Second)
		fake.Shutdown("/a")
		// /c is evicted during a slow read of its status.
		fake.SetStatusDelay(2 * time.Second)
		_, _ = r.eng.Reconnect("/c", nil)
		r.at(6 * time.Second)
		fake.Shutdown("/c")
		r.at(7 * time.Second)
		fake.SetStatusDelay(0)
		armed := []string{}
		for _, d := range r.eng.Snapshot().Directories {
			armed = append(armed, d.Directory)
		}
		if !slices.Equal(armed, []string{"/b"}) {
			t.Fatalf("armed after two evictions: %v, want /b", armed)
		}
		if n := len(r.eventsOf(EventDisarmed)); n != 2 {
			t.Fatalf("disarmed events = %d, want 2", n)
		}
		fake.ResetRequests()
		r.at(2 * time.Hour)
		for _, d := range []string{"/a", "/c"} {
			if n := fake.Count("", d, ""); n != 0 {
				t.Fatalf("%d requests for the evicted location %s", n, d)
			}
		}
		if got := fake.Instances(); !slices.Equal(got, []string{"/b"}) {
			t.Fatalf("booted locations = %v, want /b only", got)
		}
		if n := fake.Count(routeStatus, "/b", ""); n < 200 {
			t.Fatalf("/b was read %d times in two hours: it stopped too", n)
		}
		// A session in /a: armed again, read initial-delay later (and
		// the outcome of its failed server's connect), booted.
		fake.Activity("/a")
		r.at(2*time.Hour + time.Second + announceGrace + 100*time.Millisecond)
		if n := fake.Count(routeStatus, "/a", ""); n != 2 {
			t.Fatalf("reads of /a after a session event = %d, want 2 (before and after the connect)", n)
		}
		if got := fake.Instances(); !slices.Equal(got, []string{"/a", "/b"}) {
			t.Fatalf("booted locations = %v, want /a again", got)
		}
	})
}

// Server state changes announced just after location.shutdown (the
// location stopping its servers) do not arm the evicted location again;
// a session there does.
func TestStatusChangesAfterShutdownDoNotRearm(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"a": {}, "b": {}})
		if fake.Profile().NoShutdownEvent {
			t.Skip("no location.shutdown on this build: TestDisposedLocationIsNotBootedAgain and the e2e disposal test cover it")
		}
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(5 * time.Second)
		fake.Shutdown(dirA)
		for _, n := range []string{"a", "b"} {
			fake.Publish(dirA, "mcp.status.changed", map[string]any{"server": n})
		}
		r.at(time.Minute)
		if n := len(r.eng.Snapshot().Directories); n != 0 {
			t.Fatalf("%d directories armed after the shutdown's status changes", n)
		}
		fake.Activity(dirA)
		r.at(time.Minute + 2*time.Second)
		if n := len(r.eng.Snapshot().Directories); n != 1 {
			t.Fatalf("a session did not arm the location again")
		}
	})
}
