package reconnect

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

const dirA = "/work/project a"

// Rule 4: attempts land 1, 2, 4, 8 and 16 s after arming with the defaults,
// then the slow tier takes over (rule 5).
func TestScheduleDefaults(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
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
		if n := fake.Count(routeConnect, dirA, "fine"); n != 0 {
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

// The engine makes exactly the requests its schedule implies, no more: 50
// directories × 10 servers, one failing for good, over 11 minutes.
func TestRequestsAreExactlyTheSchedule(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		specs := map[string]Spec{}
		for i := range 9 {
			specs[fmt.Sprintf("ok%d", i)] = Spec{}
		}
		specs["dead"] = Spec{Status: "failed", Error: "Connection closed"}
		fake := g.new(specs)
		cfg := noJitter()
		cfg.MaxConcurrent = 1000 // no slot waits, so times are exact
		r := newRig(t, fake, cfg, nil)
		const dirs = 50
		for i := range dirs {
			_ = r.eng.Arm(fmt.Sprintf("/p/%d", i), "test")
		}
		r.at(11 * time.Minute)
		// Per directory: status reads at 1, 2, 4, 8, 16 s, then every 30 s
		// from 46 s to 646 s (21); connects at 1, 2, 4, 8, 16, 316, 616 s;
		// one config read to learn the failing server's kind.
		if got, want := fake.Count(routeStatus, "", ""), dirs*26; got != want {
			t.Errorf("status reads = %d, want %d", got, want)
		}
		if got, want := fake.Count(routeConnect, "", ""), dirs*7; got != want {
			t.Errorf("connects = %d, want %d", got, want)
		}
		if got, want := fake.Count(routeConfig, "", ""), dirs; got != want {
			t.Errorf("config reads = %d, want %d", got, want)
		}
		// Besides, once per rig (not per directory), the detection at
		// start: 1.x is asked GET /api/info (the 1.x fake answers 404 and
		// records nothing) then GET /global/health; 2.x answers the first.
		if got := fake.Count(routeDetect, "", ""); got != 1 {
			t.Errorf("detection requests = %d, want 1", got)
		}
		detect := map[string][]string{"v1": {"GET /api/info", "GET /global/health"}, "v2": {"GET /api/info"}}[g.name]
		if got := len(fake.Requests()); got != dirs*34+1 {
			t.Errorf("recorded requests = %d, want %d", got, dirs*34+1)
		}
		wire := r.wireRequests()
		if got := len(wire); got != dirs*34+len(detect) || !slices.Equal(wire[:len(detect)], detect) {
			t.Errorf("requests received = %d starting %q, want %d starting %q", got, wire[:min(len(wire), len(detect))], dirs*34+len(detect), detect)
		}
	})
}
