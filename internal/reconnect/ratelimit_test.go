package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

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
