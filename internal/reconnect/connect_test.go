package reconnect

import (
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"testing"
	"testing/synctest"
	"time"
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

// After its own connect the daemon's row shows what OpenCode says within a
// second of OpenCode saying it (the connect's return), by a read and
// without another connect, and "reconnected" dates from then: on the
// second and third crash of a stdio server (a crash loop, whose next
// attempt is 2 and 4 s away) it showed "failed" until that attempt's
// check, seconds after OpenCode said connected.
func TestStatusShowsAConnectsOutcomeWithinASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		oc.delay["s"] = 400 * time.Millisecond // OpenCode starts the server
		oc.after["s"] = "connected"
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()
		row := func() ServerSnapshot { return e.Snapshot().Directories[0].Servers[0] }

		start := time.Now()
		for crash := range 3 {
			oc.set("/p", "s", "failed")
			e.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"})
			// Until the connect returns, OpenCode says failed.
			for len(oc.connectTimes("/p", "s", start)) == crash {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(400 * time.Millisecond)
			back := time.Now() // the connect returned: OpenCode says connected
			time.Sleep(time.Second)
			synctest.Wait()
			if r := row(); r.Status != opencode.StatusConnected || r.LastReconnect.Before(back) || r.LastReconnect.After(back.Add(time.Second)) {
				t.Fatalf("crash %d: a second after OpenCode said connected the row shows %s, reconnected %v after that", crash+1, r.Status, r.LastReconnect.Sub(back))
			}
			if n := len(oc.connectTimes("/p", "s", start)); n != crash+1 {
				t.Fatalf("crash %d: %d connects, want %d", crash+1, n, crash+1)
			}
			time.Sleep(3 * time.Second)
		}
	})
}

// A crash loop that reaches the slow tier: each attempt of ours brings
// the server back for two seconds. After each crash the row shows what
// OpenCode says within a second, in the slow tier too, where a crash
// report wakes no attempt (rule 5) but the daemon's belief that the
// server is connected is corrected by one read; and the give-up is told
// when a read shows the last fast attempt failed, not when it returned.
func TestStatusFollowsACrashLoopIntoTheSlowTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		oc.delay["s"] = 400 * time.Millisecond
		oc.after["s"] = "connected"
		var gaveUp []time.Time
		e, err := New(noJitter(), oc, Options{OnEvent: func(ev Event) {
			if ev.Type == EventGaveUp {
				gaveUp = append(gaveUp, ev.Time)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()
		row := func() ServerSnapshot { return e.Snapshot().Directories[0].Servers[0] }
		start := time.Now()
		crash := func() {
			oc.set("/p", "s", "failed")
			e.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"})
		}
		// Crash after crash: each of the episode's five attempts (the
		// first crash's at once among them) brings it back.
		for n := 0; n < 5; {
			crash()
			for len(oc.connectTimes("/p", "s", start)) == n {
				time.Sleep(10 * time.Millisecond)
			}
			n++
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if r := row(); r.Status != opencode.StatusConnected {
				t.Fatalf("connect %d: two seconds after it brought the server back the row shows %s", n, r.Status)
			}
		}
		if len(gaveUp) != 0 {
			t.Fatalf("gave_up told while the last fast attempt's outcome was connected: %v; connects %v", gaveUp, oc.connectTimes("/p", "s", start))
		}
		// The slow tier: the crash wakes no attempt, but the row follows.
		crashed := time.Now()
		crash()
		time.Sleep(time.Second)
		synctest.Wait()
		if r := row(); r.Status != opencode.StatusFailed || r.Tier != "slow" {
			t.Fatalf("a second after a crash in the slow tier the row shows %s, tier %q", r.Status, r.Tier)
		}
		if len(gaveUp) != 1 || gaveUp[0].Before(crashed) {
			t.Fatalf("gave_up told %d times (%v), want once, after the read that showed the last attempt failed", len(gaveUp), gaveUp)
		}
		time.Sleep(4 * time.Minute)
		if n := len(oc.connectTimes("/p", "s", start)); n != 5 {
			t.Fatalf("%d connects in the slow tier's first four minutes", n-5)
		}
	})
}

// crashLoopIntoSlowTier arms /p with a local server s that crash-loops:
// each of the fast episode's five attempts brings it back, and it crashes
// again two seconds later. It returns with s connected (the fifth attempt
// brought it back) and in the slow tier.
func crashLoopIntoSlowTier(t *testing.T, e *Engine, oc *ocStub) {
	t.Helper()
	time.Sleep(90 * time.Second) // connected and stable
	synctest.Wait()
	start := time.Now()
	for n := 0; n < 5; {
		oc.set("/p", "s", "failed")
		e.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"})
		for len(oc.connectTimes("/p", "s", start)) == n {
			time.Sleep(10 * time.Millisecond)
		}
		n++
		time.Sleep(2 * time.Second)
		synctest.Wait()
	}
	if r := e.Snapshot().Directories[0].Servers[0]; r.Status != opencode.StatusConnected || r.Attempts != 5 {
		t.Fatalf("setup: %+v, want connected after five attempts", r)
	}
}

// Rules 5 and 6: a server in the slow tier that OpenCode reports changed
// while it stays connected (1.x publishes mcp.tools.changed when a live
// server's tool list changes; 2.x mcp.status.changed on every transition)
// must not cost a status read per report. A storm of ten reports a
// second for five seconds may cost a read per initial-delay at most.
func TestSlowTierReportsOfAConnectedServerAreBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   opencode.Event
	}{
		{"1.x mcp.tools.changed", opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"}},
		{"2.x mcp.status.changed", opencode.Event{Kind: opencode.KindServerChanged, Type: "mcp.status.changed", Directory: "/p", Server: "s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				oc := newStub()
				oc.set("/p", "s", "connected")
				oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
				oc.delay["s"] = 400 * time.Millisecond
				oc.after["s"] = "connected"
				e, err := New(noJitter(), oc, Options{})
				if err != nil {
					t.Fatal(err)
				}
				_ = e.Arm("/p", ArmedByFlag)
				stop := runEngine(e)
				defer stop()
				crashLoopIntoSlowTier(t, e, oc)
				time.Sleep(2 * time.Second) // past the last attempt's initial-delay
				synctest.Wait()

				reads := oc.count("status", "/p")
				for range 50 { // the server stays connected throughout
					e.HandleEvent(c.ev)
					time.Sleep(100 * time.Millisecond)
					synctest.Wait()
				}
				if n := oc.count("status", "/p") - reads; n > 6 {
					t.Fatalf("%d status reads for 50 reports in 5 s of a connected server in the slow tier; want at most one per initial-delay (6)", n)
				}
			})
		})
	}
}

// A server's episode is allocated when one begins and dropped when it is
// over: most servers are healthy and hold none. A connect that returns
// after the episode was forgotten meanwhile (here the user's reconnect,
// while the connect was in flight) makes a fresh one with no attempt in
// it (Returned); the reads that then show the server connected drop it
// (Spent), so a healthy server does not hold an episode for ever.
func TestAHealthyServerHoldsNoEpisodeAfterAReconnectDuringAConnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "failed")
		oc.delay["s"] = 5 * time.Second
		oc.after["s"] = "connected"
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		if err := e.Arm("/p", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the connect of s, sent at 1 s, is in flight
		if _, err := e.Reconnect("/p", []string{"s"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute) // connected, stable, read every idle interval
		synctest.Wait()
		e.mu.Lock()
		s := e.dirs["/p"].servers["s"]
		status, ep := s.status, s.ep
		e.mu.Unlock()
		if status != "connected" {
			t.Fatalf("status = %q, want connected", status)
		}
		if ep != nil {
			t.Fatalf("s, connected for ten minutes, still holds an episode (%d attempts, returned after the reconnect forgot it): want nil while healthy", ep.NumRequeues())
		}
	})
}
