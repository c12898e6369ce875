package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

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
