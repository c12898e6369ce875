package reconnect

import (
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// notYetTimes is when each request the fake answered "not yet" was
// received, relative to the rig's start.
func (r *rig) notYetTimes() []time.Duration {
	var out []time.Duration
	for _, q := range r.fake.Requests() {
		if q.Route == fake2.RouteNotReady {
			out = append(out, q.Time.Sub(r.start))
		}
	}
	return out
}

// A connect OpenCode 2 keeps answering "not yet" (503 with Retry-After: 1,
// while its status reads still answer) reached no MCP server each time,
// but the engine must not try again at the server's pace for ever: each
// such answer in a row waits longer (1 s doubling), never longer than the
// slow tier's interval.
func TestConnectsAnsweredNotYetInARowWaitLongerEachTime(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		fake.NotYetConnects(1000, time.Second)
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Minute)
		got := r.notYetTimes()
		if len(got) > 10 {
			t.Fatalf("%d connects answered not yet in two minutes (%v); want them spaced 1 s doubling", len(got), got)
		}
		for i := 2; i < len(got); i++ {
			if gap, prev := got[i]-got[i-1], got[i-1]-got[i-2]; gap < prev {
				t.Fatalf("connects at %v: gap %d (%v) shorter than the one before (%v)", got, i, gap, prev)
			}
		}
		if s := r.server(dirA, "f"); s.Attempts != 0 {
			t.Fatalf("f = %+v; a connect answered not yet does not count", s)
		}
		r.at(30 * time.Minute)
		got = r.notYetTimes()
		for i := 1; i < len(got); i++ {
			if gap := got[i] - got[i-1]; gap > DefaultConfig.Backoff.SlowInterval+2*time.Second {
				t.Fatalf("connects at %v: gap %v longer than the slow tier's interval", got, gap)
			}
		}
	})
}
