package reconnect

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// Every connect is decided from a fresh read, and every
// trigger is charged to the server's episode.

// A server waiting for a connect slot is not connected from the status
// read before it started waiting: the user disabled it meanwhile, and a
// connect would re-enable it (rule 1, rule 7).
func TestSlotWaitRereadsStatusBeforeConnect(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		fake.SetDirConfig("/busy", map[string]Spec{"slow": {Status: "failed", ConnectDelay: 20 * time.Second}})
		cfg := noJitter()
		cfg.MaxConcurrent = 1
		r := newRig(t, fake, cfg, nil)
		_ = r.eng.Arm("/busy", "test")
		r.at(500 * time.Millisecond)
		_ = r.eng.Arm(dirA, "test") // its first check at 1.5 s finds the only slot taken
		r.at(2 * time.Second)
		if s := r.server(dirA, "f"); !s.WaitingForSlot || s.Attempts != 0 {
			t.Errorf("f = %+v, want waiting for a slot, uncharged", s)
		}
		fake.SetStatus(dirA, "f", "disabled", "") // the user disables it while it waits
		r.at(30 * time.Second)                    // the slot came free at 21 s
		if n := fake.Count(routeConnect, dirA, "f"); n != 0 {
			t.Fatalf("a server disabled during its slot wait got %d connects", n)
		}
		if s := r.server(dirA, "f"); s.Status != "disabled" {
			t.Fatalf("f = %+v, want disabled", s)
		}
	})
}

// A slot wait costs one status read per slot handed over, not one per
// poll: a thousand waiting directories do not hammer OpenCode while a
// connect holds the only slot for a minute.
func TestSlotWaitDoesNotPoll(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		fake.SetDirConfig("/busy", map[string]Spec{"slow": {Status: "failed", ConnectDelay: 60 * time.Second}})
		cfg := noJitter()
		cfg.MaxConcurrent = 1
		r := newRig(t, fake, cfg, nil)
		_ = r.eng.Arm("/busy", "test")
		r.at(500 * time.Millisecond)
		for i := range 20 {
			_ = r.eng.Arm(fmt.Sprintf("/wait/%d", i), "test")
		}
		r.at(50 * time.Second)
		// Each waiting directory: its first check, one idle check at about
		// 31 s; nothing else while the slot is held.
		if n := fake.Count(routeStatus, "", "") - fake.Count(routeStatus, "/busy", ""); n > 20*2 {
			t.Fatalf("%d status reads by 20 directories waiting for a slot", n)
		}
	})
}

// A restart repair is decided from a fresh read too: a remote server the
// user disabled after its endpoint was last seen is left disabled.
func TestRestartRepairRereadsStatus(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		ep.up.Store(true)
		r, fake := probeRigWith(t, g, ep, map[string]Spec{
			"r": {Type: "remote", URL: "http://r.test:9000/mcp"},
		}, Options{})
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second) // connected; its endpoint is watched
		fake.SetStatus(dirA, "r", "disabled", "")
		ep.up.Store(false)
		ep.close() // the server restarts
		r.at(4 * time.Second)
		ep.up.Store(true)
		r.at(10 * time.Second)
		if n := fake.Count(routeConnect, dirA, "r"); n != 0 {
			t.Fatalf("a disabled server got %d connects from a restart repair", n)
		}
	})
}

// OpenCode restarted (the stream came back after refused connections):
// every directory is forgotten, and no request names one until a client
// uses it again (rule 8).
func TestRestartOfOpenCodeForgetsDirectories(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm("/a", "test")
		_ = r.eng.Arm("/b", "test")
		r.at(time.Minute)
		r.eng.OpenCodeReplaced()
		fake.ResetRequests()
		r.at(10 * time.Minute)
		if reqs := r.perDirRequests(); len(reqs) != 0 {
			t.Fatalf("requests after OpenCode restarted: %+v", reqs)
		}
		if n := len(r.eng.Snapshot().Directories); n != 0 {
			t.Fatalf("%d directories still armed", n)
		}
		// A client uses /b again: it is armed and checked.
		fake.Activity("/b")
		r.at(10*time.Minute + 1500*time.Millisecond)
		if n := fake.Count(routeStatus, "/b", ""); n != 2 {
			t.Fatalf("status reads of /b after activity = %d, want 2 (before its failed server's connect and of its outcome)", n)
		}
		if n := fake.Count("", "/a", ""); n != 0 {
			t.Fatalf("%d requests for /a, which nobody used", n)
		}
	})
}

// A stream hiccup (OpenCode stayed reachable) re-checks each armed
// directory once.
func TestStreamHiccupRechecksOnce(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"ok": {}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm("/a", "test")
		r.at(5 * time.Second)
		before := fake.Count(routeStatus, "/a", "")
		r.eng.StreamConnected()
		r.at(6*time.Second + time.Millisecond)
		if n := fake.Count(routeStatus, "/a", "") - before; n != 1 {
			t.Fatalf("reads after a hiccup = %d, want 1", n)
		}
	})
}

// refusingOC answers every call with a refused connection while refuse is
// set, as a restarting OpenCode does.
// refusingOC refuses status reads while refuse is set, and tells gone
// once per absence before the read returns, as opencode.Server does
// (its OnChange, which the daemon hands to Engine.OpenCodeGone).
type refusingOC struct {
	OpenCode
	refuse atomic.Bool
	gone   func(error)
	told   atomic.Bool
}

func (o *refusingOC) MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error) {
	if o.refuse.Load() {
		err := fmt.Errorf("dial tcp 127.0.0.1:4096: connect: connection refused: %w", opencode.ErrRefused)
		if o.gone != nil && !o.told.Swap(true) {
			o.gone(err)
		}
		return nil, err
	}
	o.told.Store(false)
	return o.OpenCode.MCPStatus(ctx, dir)
}

// From the moment OpenCode refuses connections, every directory is
// forgotten: the next status read, when it is back, would re-create
// instances nobody uses.
func TestRefusedConnectionForgetsDirectories(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"ok": {}})
		rr := &rig{t: t, fake: fake}
		tr, stop := rr.serve()
		defer stop()
		client, _ := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Transport: tr, Password: fake.Secret()}})
		if _, _, err := client.Detect(context.Background()); err != nil {
			t.Fatal(err)
		}
		oc := &refusingOC{OpenCode: client}
		eng, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		oc.gone = eng.OpenCodeGone
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = eng.Run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		_ = eng.Arm("/a", "test")
		_ = eng.Arm("/b", "test")
		time.Sleep(2 * time.Second)
		oc.refuse.Store(true)
		time.Sleep(40 * time.Second) // an idle check is refused
		synctest.Wait()
		oc.refuse.Store(false)
		fake.ResetRequests()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := len(fake.Requests()); n != 0 {
			t.Fatalf("%d requests after OpenCode refused connections", n)
		}
		if n := len(eng.Snapshot().Directories); n != 0 {
			t.Fatalf("%d directories still armed", n)
		}
	})
}

// An endpoint that flaps (up a second, down a second) does not buy its
// server a connect per flap: the fast episode, then one per max-delay at
// most; with slow-interval 0, nothing after the fast episode (rule 5).
func TestFlappingEndpointRespectsSlowTier(t *testing.T) {
	for _, slow := range []time.Duration{5 * time.Minute, 0} {
		t.Run(fmt.Sprint("slow-interval=", slow), func(t *testing.T) {
			eachGen(t, func(t *testing.T, g generation) {
				ep := &endpoint{}
				fake := g.new(map[string]Spec{
					"r": {Status: "failed", Type: "remote", URL: "http://r.test:9000/mcp"},
				})
				cfg := noJitter()
				cfg.Backoff.SlowInterval = slow
				o := Options{}
				r := newRigFlapping(t, fake, cfg, o, ep)
				_ = r.eng.Arm(dirA, "test")
				for i := range 600 { // ten minutes of flapping
					ep.up.Store(i%2 == 0)
					r.at(time.Duration(i+1) * time.Second)
				}
				n := len(r.connectTimes(dirA, "r"))
				limit := 5 + int(10*time.Minute/cfg.Backoff.Max) + 1
				if slow == 0 {
					limit = 5
				}
				if n > limit {
					t.Fatalf("%d connects in ten minutes of flapping, want at most %d", n, limit)
				}
				if slow == 0 && n != 5 {
					t.Fatalf("%d connects with slow-interval 0, want exactly the 5 fast ones", n)
				}
			})
		})
	}
}

// newRigFlapping is a probing rig over ep.
func newRigFlapping(t *testing.T, fake fakeOC, cfg Config, o Options, ep *endpoint) *rig {
	o.Prober = newTestProber(ep)
	r := newRigWith(t, fake, cfg, o)
	t.Cleanup(ep.close)
	return r
}

// A connect answered 404 is an attempt like any other: the episode goes
// on to the slow tier and says so; only a read that no longer lists the
// server forgets it.
func TestConnect404KeepsEpisode(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"ghost": {Status: "failed", ConnectNotFound: true}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(5*time.Minute + 20*time.Second)
		if got, want := r.connectTimes(dirA, "ghost"), secs(1, 2, 4, 8, 16, 316); !equalDurations(got, want) {
			t.Fatalf("connect times = %v, want %v", got, want)
		}
		if n := len(r.eventsOf(EventGaveUp)); n != 1 {
			t.Fatalf("gave_up events = %d, want 1", n)
		}
	})
}

// A server that crashes two seconds after every reconnect continues its
// episode and reaches the slow tier, instead of being respawned every few
// seconds forever (the kubelet's crash-loop backoff).
func TestCrashLoopReachesSlowTier(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"loop": {AfterConnect: "connected", CrashAfter: 2 * time.Second}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second) // seen connected
		fake.Crash(dirA, "loop")
		r.at(10 * time.Minute)
		starts := fake.Starts(dirA, "loop")
		// 5 fast attempts, then one per 5 min: 7 in ten minutes at most.
		if starts < 5 || starts > 7 {
			t.Fatalf("a crash-looping server was started %d times in ten minutes, want 5 to 7", starts)
		}
		if n := len(r.eventsOf(EventGaveUp)); n != 1 {
			t.Fatalf("gave_up events = %d, want 1", n)
		}
	})
}

// A server that stays connected for stable-after after its last attempt
// clears its counter; its next crash starts a fresh episode.
func TestStableServerClearsItsCounter(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed", AfterConnect: "connected"}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(30 * time.Second) // attempt at 1 s, seen connected at 2 s
		if s := r.server(dirA, "f"); s.Status != "connected" || s.Attempts != 1 {
			t.Fatalf("within stable-after: %+v, want connected with its attempt counted", s)
		}
		r.at(90 * time.Second) // an idle check after 61 s saw it still connected
		if s := r.server(dirA, "f"); s.Attempts != 0 {
			t.Fatalf("after stable-after: %+v, want a clear counter", s)
		}
	})
}

// A first crash (a connected server with a clear counter) is checked and
// connected at once, not initial-delay later: 1.x reports a closed
// connection (mcp.tools.changed); 2.x reports only a transition
// (mcp.status.changed), but one of a server last seen connected and
// stable may be a crash, and the read decides.
func TestFirstCrashIsRetriedAtOnce(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {AfterConnect: "connected"}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(10 * time.Second)
		fake.Crash(dirA, "s")
		first := 10 * time.Second
		r.at(first + time.Millisecond)
		if got := r.connectTimes(dirA, "s"); len(got) != 1 || got[0] != first {
			t.Fatalf("connects = %v, want one at %v", got, first)
		}
		// A second crash soon after is a crash loop: initial-delay later.
		r.at(12 * time.Second)
		fake.Crash(dirA, "s")
		r.at(12*time.Second + 500*time.Millisecond)
		if got := r.connectTimes(dirA, "s"); len(got) != 1 {
			t.Fatalf("connects = %v, want no shortcut for a crash loop", got)
		}
		r.at(13*time.Second + time.Millisecond)
		if got := r.connectTimes(dirA, "s"); len(got) != 2 || got[1] != 13*time.Second {
			t.Fatalf("connects = %v, want the second at 13s", got)
		}
	})
}

// A thousand crash reports for a healthy server cost a bounded number of
// reads: the shortcut runs at most once per initial-delay per directory.
func TestCrashReportStormIsBounded(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second)
		before := fake.Count(routeStatus, dirA, "")
		for i := range 1000 {
			fake.ReportCrash(dirA, "s")
			r.at(2*time.Second + time.Duration(i)*10*time.Millisecond)
		}
		if n := fake.Count(routeStatus, dirA, "") - before; n > 25 {
			t.Fatalf("%d status reads for 1000 crash reports over 10 s", n)
		}
	})
}

// Network changes are rate limited by themselves, not only by the slow
// tier: at most one network-triggered attempt per server per max-delay,
// in the fast episode too (docs/guide.md, "Network changes"). Here the fast
// episode never ends (fast-attempts 1000), so a thousand changes over ten
// minutes meet the limit alone: the schedule makes about one attempt per
// max-delay, and the changes at most one more each.
func TestNetworkChangesAreRateLimited(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		cfg := noJitter()
		cfg.Backoff.FastAttempts = 1000
		r := newRig(t, fake, cfg, nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(time.Minute)
		before := len(r.connectTimes(dirA, "f"))
		for i := range 1000 {
			r.eng.NetworkChanged()
			r.at(time.Minute + time.Duration(i)*600*time.Millisecond)
		}
		// 600 s: 20 scheduled attempts (every max-delay) and at most 20
		// network-triggered ones, give or take the ends.
		n := len(r.connectTimes(dirA, "f")) - before
		if n > 2*20+2 {
			t.Fatalf("%d connects in ten minutes under a thousand network changes in the fast episode, want at most one network-triggered per max-delay", n)
		}
		// The changes do buy attempts in the fast episode: more than the
		// schedule alone makes.
		if n < 20+10 {
			t.Fatalf("%d connects in ten minutes of network changes, want network-triggered attempts besides the 20 scheduled", n)
		}
		if s := r.server(dirA, "f"); s.Tier != TierFast {
			t.Fatalf("%+v: the test wants the fast episode", s)
		}
	})
}

// With slow-interval 0, a network change causes no attempt at all once the
// fast episode is spent.
func TestNetworkChangeRespectsStopped(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		cfg := noJitter()
		cfg.Backoff.SlowInterval = 0
		r := newRig(t, fake, cfg, nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(time.Minute)
		r.eng.NetworkChanged()
		r.at(2 * time.Minute)
		if n := len(r.connectTimes(dirA, "f")); n != 5 {
			t.Fatalf("%d connects, want the 5 fast ones only", n)
		}
	})
}

// One failed GET /config does not leave server kinds unknown for good: the
// next check asks again, and the remote server is then probed.
func TestConfigFailureIsRetried(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		fake := g.new(map[string]Spec{
			"r": {Status: "failed", Type: "remote", URL: "http://r.test:9000/mcp"},
		})
		if noConfigRoute(fake) {
			t.Skip("no config route: the kinds come from the config files (internal/opencode TestConfigFiles)")
		}
		fake.FailConfig(1)
		r := newRigFlapping(t, fake, noJitter(), Options{}, ep)
		_ = r.eng.Arm(dirA, "test")
		r.at(30 * time.Second)
		if n := fake.Count(routeConfig, dirA, ""); n != 2 {
			t.Fatalf("config reads = %d, want 2 (one failed, one asked again)", n)
		}
		if ep.dials.Load() == 0 {
			t.Fatal("the remote server was never probed")
		}
	})
}

// --stable-after counts from when the attempt's connect returned, not from
// when it started: a connect that took most of a minute (a slow remote)
// has not shown the server stable for that minute.
func TestStableAfterCountsFromTheConnectsReturn(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed", AfterConnect: "connected", ConnectDelay: 50 * time.Second}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(100 * time.Second) // attempt at 1 s, returned at 51 s, connected since
		if s := r.server(dirA, "f"); s.Status != "connected" || s.Attempts != 1 {
			t.Fatalf("49 s after the connect returned: %+v, want connected with its attempt still counted", s)
		}
		r.at(130 * time.Second) // an idle check 60 s after the return
		if s := r.server(dirA, "f"); s.Attempts != 0 {
			t.Fatalf("stable-after past the connect's return: %+v, want a clear counter", s)
		}
	})
}
