package reconnect

import (
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// OpenCode 2 answering "not yet" (503 with retry-after: 1 while its
// service starts or stops, facts §6) is neither a failure of an MCP
// server nor news: every counter stays, no connect is sent, the next
// check waits at least the Retry-After (one backoff step longer each
// time it is still not ready), the engine does not look stuck, and once
// the service is ready the schedule goes on.
func TestNotYetKeepsCountersAndWaits(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(1500 * time.Millisecond) // the check at 1 s connected f: its next attempt is due at 2 s
		if s := r.server(dirA, "f"); s.Attempts != 1 {
			t.Fatalf("setup: f = %+v, want one attempt", s)
		}
		fake.SetService(fake2.ServiceStopping)
		r.at(30 * time.Second)
		if s := r.server(dirA, "f"); s.Attempts != 1 || s.Status != opencode.StatusFailed {
			t.Fatalf("while OpenCode said not yet: f = %+v; want its one attempt, still failed", s)
		}
		if got := r.connectTimes(dirA, "f"); len(got) != 1 {
			t.Fatalf("connects %v while OpenCode said not yet", got)
		}
		// Reads at about 2, 3, 5, 9 and 17 s (1 s doubling, jittered).
		if n := fake.Server.Count(fake2.RouteNotReady, "", ""); n < 4 || n > 6 {
			t.Fatalf("%d requests answered not yet in 28 s; want them spaced 1 s doubling", n)
		}
		if err := r.eng.Alive(time.Second); err != nil {
			t.Fatalf("waiting for OpenCode looks stuck: %v", err)
		}
		fake.SetService("")
		r.at(100 * time.Second)
		// The paced check after 30 s: its wait is the sixth or seventh
		// step (16 or 32 s, ±20 %), so at most about 70 s.
		if got := r.connectTimes(dirA, "f"); len(got) < 2 || got[1] < 30*time.Second || got[1] > 71*time.Second {
			t.Fatalf("connects once ready: %v; want the episode to go on at the next paced check", got)
		}
	})
}

// A check of a directory OpenCode's events armed asks first whether its
// location is still booted. While the server's API description cannot be
// read, whether the server can tell is not known: the check waits for
// the description (holding no slot, never past due) instead of reading
// the directory, which would boot it again if it was disposed.
func TestCheckWaitsForTheDescriptionBeforeReading(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"f": {Status: "failed"}})
		fake.FailDoc(1)
		r := newRig(t, fake, noJitter(), nil)
		r.eng.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: dirA})
		r.at(1500 * time.Millisecond) // the check at 1 s found the description unreadable
		if n := fake.Server.Count(fake2.RouteMCP, dirA, ""); n != 0 {
			t.Fatalf("%d status reads of %s before the description said whether its location is booted", n, dirA)
		}
		if err := r.eng.Alive(time.Second); err != nil {
			t.Fatal(err)
		}
		r.at(5 * time.Second) // the description answers about a second later
		if n := fake.Server.Count(fake2.RouteDoc, "", ""); n != 2 {
			t.Fatalf("description read %d times, want twice", n)
		}
		if fake.Server.Count(fake2.RouteMCP, dirA, "") > 0 {
			t.Fatalf("%s lists its booted locations: %s is not one, and was read (booted) anyway", fake.Profile().Name, dirA)
		}
	})
}

// A connect OpenCode 2 answers "not yet" (it began to stop between the
// read and the connect: 503 with Retry-After: 7) reached no MCP server:
// the attempt is refunded (the episode does not advance) and the
// directory is not checked again before the Retry-After is over, even
// when an event asks sooner; then the episode goes on where it stood.
func TestNotYetAtConnectIsRefunded(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(1500 * time.Millisecond) // the first attempt, at 1 s, counted
		fake.NotYetConnects(1, 7*time.Second)
		r.at(2500 * time.Millisecond) // the second, at 2 s: not yet
		if s := r.server(dirA, "f"); s.Attempts != 1 || s.Tier != TierFast {
			t.Fatalf("after a connect answered not yet: f = %+v; want its one counted attempt", s)
		}
		reads := fake.Count(routeStatus, dirA, "")
		r.at(4 * time.Second)
		fake.ReportCrash(dirA, "f") // a wake for 5 s: not before the Retry-After
		r.at(8900 * time.Millisecond)
		if n := fake.Count(routeStatus, dirA, "") - reads; n != 0 {
			t.Fatalf("%d status reads within the Retry-After of a connect answered not yet", n)
		}
		if err := r.eng.Alive(time.Second); err != nil {
			t.Fatalf("waiting out OpenCode's Retry-After looks stuck: %v", err)
		}
		r.at(12 * time.Second)
		// 9 s: the second attempt again (the schedule's next after one
		// attempt is 2 s after it: 11 s).
		if got, want := r.connectTimes(dirA, "f"), secs(1, 9, 11); !equalDurations(got, want) {
			t.Fatalf("connects = %v, want %v", got, want)
		}
		if s := r.server(dirA, "f"); s.Attempts != 3 {
			t.Fatalf("f = %+v, want three counted attempts by 12 s", s)
		}
	})
}
