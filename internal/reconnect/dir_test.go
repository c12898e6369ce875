package reconnect

import (
	"fmt"
	"slices"
	"strings"
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
	eachGen(t, func(t *testing.T, g generation) { exactSchedule(t, g, false) })
}

// The same with the event stream subscribed, as the daemon always is. 1.x
// publishes nothing when a connect fails (mcp.tools.changed only when a
// live connection closes): the same requests, and one subscription. 2.x
// publishes mcp.status.changed for every transition: each of our own
// connects (pending, then failed again) wakes nothing, the boot of each
// location at most one read, at a cost documented here.
func TestRequestsAreExactlyTheScheduleWithEvents(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) { exactSchedule(t, g, true) })
}

func exactSchedule(t *testing.T, g generation, events bool) {
	specs := map[string]Spec{}
	for i := range 9 {
		specs[fmt.Sprintf("ok%d", i)] = Spec{}
	}
	specs["dead"] = Spec{Status: "failed", Error: "Connection closed"}
	fake := g.new(specs)
	cfg := noJitter()
	cfg.MaxConcurrent = 1000 // no slot waits, so times are exact
	r := newRig(t, fake, cfg, nil)
	if events {
		r.stream()
	}
	const dirs = 50
	for i := range dirs {
		_ = r.eng.Arm(fmt.Sprintf("/p/%d", i), "test")
	}
	r.at(11 * time.Minute)
	// Per directory: connects at 1, 2, 4, 8, 16, 316, 616 s, each after
	// a status read and followed by a read of its outcome announceGrace
	// after it returns (at once here); between them a read every idle
	// interval from the last (47 s, 77 s, ...); one config read to learn
	// the failing server's kind.
	var reads []time.Duration
	for _, at := range []float64{1, 2, 4, 8, 16} {
		reads = append(reads, secs(at, at+announceGrace.Seconds())...)
	}
	for at := 47.0; at <= 647; at += 30 {
		if at == 317 || at == 617 {
			reads = append(reads, secs(at-1, at-1+announceGrace.Seconds())...) // the slow tier's attempts
			continue
		}
		reads = append(reads, secs(at)...)
	}
	// With the stream on, 2.x's mcp.status.changed after each of the
	// engine's own connects wakes nothing: the read after the connect
	// shows those outcomes anyway. The first read boots the location,
	// whose servers announce their start; an announcement that comes
	// after that read saw them connected reads at once (OpenCode spoke),
	// once: on 2.x a directory may read once more at 1 s, that read
	// standing in for the connect's outcome read at 1.5 s or not.
	// Afterwards both generations read exactly the same.
	extra := 0
	for i := range dirs {
		var got []time.Duration
		for _, q := range r.perDirRequests() {
			if q.Directory == fmt.Sprintf("/p/%d", i) && q.Route == routeStatus {
				got = append(got, q.Time.Sub(r.start))
			}
		}
		boot := 0
		for boot < len(got) && got[boot] <= reads[1] {
			boot++
		}
		switch {
		case equalDurations(got, reads):
		case events && g.name != "v1" && got[1] == reads[0] && (boot == 2 || boot == 3 && got[2] == reads[1]) && equalDurations(got[boot:], reads[2:]):
			extra += boot - 2
		default:
			t.Errorf("status reads of /p/%d at %v, want %v", i, got, reads)
		}
	}
	if got, want := fake.Count(routeStatus, "", ""), dirs*len(reads)+extra; got != want {
		t.Errorf("status reads = %d, want %d", got, want)
	}
	if got, want := fake.Count(routeConnect, "", ""), dirs*7; got != want {
		t.Errorf("connects = %d, want %d", got, want)
	}
	// One config read per directory to learn the failing server's kind;
	// none on the preview, which has no config route (the daemon reads
	// the config files instead).
	configReads := 1
	if g.name == "v2preview" {
		configReads = 0
	}
	if got, want := fake.Count(routeConfig, "", ""), dirs*configReads; got != want {
		t.Errorf("config reads = %d, want %d", got, want)
	}
	// Besides, once per rig (not per directory): the detection at start
	// (1.x is asked GET /api/info, which the 1.x fake answers 404 without
	// recording it, then GET /global/health; 2.0.21 answers the first; the
	// preview answers only GET /api/health), and the event subscription.
	perRig, recordedPerRig := []string{"GET /api/info", "GET /global/health"}, 1
	switch g.name {
	case "v2":
		perRig, recordedPerRig = []string{"GET /api/info"}, 1
	case "v2preview":
		perRig = []string{"GET /api/info", "GET /global/health", "GET /api/health", "GET /openapi.json"}
		recordedPerRig = len(perRig)
	}
	if n := fake.Count(routeDetect, "", ""); n != 1 && g.name != "v2preview" {
		t.Errorf("detection requests = %d, want 1", n)
	}
	subscriptions := 0
	if events {
		subscriptions = 1
	}
	if n := fake.Count(routeEvent, "", ""); n != subscriptions {
		t.Errorf("event subscriptions = %d, want %d", n, subscriptions)
	}
	perDir := len(reads) + 7 + configReads
	if got, want := len(fake.Requests()), dirs*perDir+extra+recordedPerRig+subscriptions; got != want {
		t.Errorf("recorded requests = %d, want %d", got, want)
	}
	wire := r.wireRequests()
	// The subscription may come before the description is read.
	head := slices.DeleteFunc(slices.Clone(wire), func(q string) bool { return strings.HasSuffix(q, "/event") })
	if got, want := len(wire), dirs*perDir+extra+len(perRig)+subscriptions; got != want || !slices.Equal(head[:len(perRig)], perRig) {
		t.Errorf("requests received = %d starting %q, want %d starting %q", got, head[:min(len(head), len(perRig))], want, perRig)
	}
}

// Rule 4, the first-crash shortcut: a server that crashes after it had
// been connected for a while is connected at once, then 1, 3, 7 and 15 s
// after the crash (the gaps 1, 2, 4, 8 s of the fast episode), then
// slow-interval after the last fast attempt. On both generations.
func TestScheduleAfterAFirstCrash(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "--directory")
		r.at(100 * time.Second) // connected since the first check at 1 s
		fake.SetAfterConnect(dirA, "s", "failed")
		fake.Crash(dirA, "s") // and it never comes up again
		r.at(100*time.Second + 5*time.Minute + 20*time.Second)
		got := r.connectTimes(dirA, "s")
		want := secs(100, 101, 103, 107, 115, 415)
		if !equalDurations(got, want) {
			t.Fatalf("connect times = %v, want %v", got, want)
		}
	})
}

// Every delay of the schedule is jittered by a factor in [1-j, 1+j] (the
// first check after arming only downwards: it is never later than
// initial-delay), and a slow-tier attempt is rounded up to the next whole
// second (the idle grid). README, SPEC and --help say exactly this.
func TestScheduleJitterBoundsIncludeTheSlowTier(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"broken": {Status: "failed"}})
		cfg := DefaultConfig // jitter 0.2
		r := newRig(t, fake, cfg, nil)
		var dirs []string
		for i := range 20 {
			d := fmt.Sprintf("/p/%d", i)
			dirs = append(dirs, d)
			_ = r.eng.Arm(d, "--directory")
		}
		r.at(13 * time.Minute)
		p := cfg.Backoff
		for _, d := range dirs {
			got := r.connectTimes(d, "broken")
			if len(got) < 7 {
				t.Fatalf("%s: %d attempts in 13 minutes: %v", d, len(got), got)
			}
			if got[0] < time.Duration(float64(p.Initial)*(1-p.Jitter)) || got[0] > p.Initial {
				t.Errorf("%s: first attempt %v after arming, want within [0.8, 1] s", d, got[0])
			}
			for n := 1; n < len(got); n++ {
				nominal, _ := p.After(n)
				gap := got[n] - got[n-1]
				lo, hi := time.Duration(float64(nominal)*(1-p.Jitter)), time.Duration(float64(nominal)*(1+p.Jitter))
				if p.Slow(n) {
					hi += time.Second // the idle grid
				}
				if gap < lo || gap > hi {
					t.Errorf("%s: gap after attempt %d = %v, want within [%v, %v]", d, n, gap, lo, hi)
				}
			}
		}
	})
}
