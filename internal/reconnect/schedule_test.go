package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

const dirA = "/work/project a"

// Rule 4: attempts land 1, 2, 4, 8 and 16 s after arming with the defaults,
// then the slow tier takes over (rule 5).
func TestScheduleDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fakeopencode.New(map[string]fakeopencode.Spec{
			"broken": {Status: "failed", Error: "Connection closed"},
			"fine":   {},
		})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		r.at(5*time.Minute + 20*time.Second)
		got := r.connectTimes(dirA, "broken")
		want := secs(1, 2, 4, 8, 16, 316)
		if !equalDurations(got, want) {
			t.Fatalf("connect times = %v, want %v", got, want)
		}
		if n := fake.Count("/mcp/{name}/connect", dirA, "fine"); n != 0 {
			t.Fatalf("connected a healthy server %d times", n)
		}
		if s := r.server(dirA, "broken"); s.Tier != TierSlow || s.Attempts != 6 {
			t.Fatalf("snapshot = %+v, want slow tier with 6 attempts", s)
		}
		if n := len(r.eventsOf(EventGaveUp)); n != 1 {
			t.Fatalf("gave_up events = %d, want 1", n)
		}
	})
}
