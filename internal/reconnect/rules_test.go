package reconnect

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Rule 1: only failed is retried, whatever else happens: arming, events
// naming the server, explicit reconnects.
func TestOnlyFailedIsRetried(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
			"c": {Status: "connected"},
			"d": {Status: "disabled"},
			"f": {Status: "failed", Error: "boom"},
			"a": {Status: "needs_auth"},
			"r": {Status: "needs_client_registration"},
			"x": {Status: "some_future_status"},
		})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		if err := r.eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		r.at(3 * time.Second)
		for _, n := range []string{"c", "d", "f", "a", "r", "x"} {
			fake.ReportCrash(dirA, n)
			if _, err := r.eng.Reconnect(dirA, []string{n}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.eng.Reconnect("", nil); err != nil {
			t.Fatal(err)
		}
		r.at(2 * time.Minute)
		for _, n := range []string{"c", "d", "a", "r", "x"} {
			if got := fake.Count(routeConnect, "", n); got != 0 {
				t.Errorf("server %q (not failed) got %d connect calls", n, got)
			}
		}
		if got := fake.Count(routeConnect, dirA, "f"); got < 3 {
			t.Errorf("failed server got %d connect calls, want several", got)
		}
		if s := r.server(dirA, "a"); !strings.Contains(s.Hint, "opencode mcp auth a") {
			t.Errorf("needs_auth hint = %q", s.Hint)
		}
		if n := len(r.eventsOf(EventNeedsUserInput)); n != 2 {
			t.Errorf("needs_user events = %d, want 2 (needs_auth, needs_client_registration)", n)
		}
	})
}

// Rule 3: no per-directory request before arming, for every kind of event
// that must not arm.
func TestPassiveUntilArmed(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		const d = "/home/u/idle project"
		if g.name == "v1" {
			fake.Publish("global", "project.updated", map[string]any{"id": "p", "worktree": d})
			fake.Publish(d, "project.updated", map[string]any{"id": "p", "worktree": d})
			fake.Publish(d, "project.initialized", map[string]any{"worktree": d})
			fake.Publish(d, "server.heartbeat", nil)
			fake.Publish(d, "server.connected", nil)
			fake.Publish(d, "installation.updated", nil)
			fake.Publish(d, "file.edited", map[string]any{"file": d + "/x"})
			fake.Publish(d, "lsp.updated", nil)
			fake.Publish(d, "server.instance.disposed", map[string]any{"directory": d})
			fake.Publish("global", "global.disposed", nil)
			fake.Publish("global", "mcp.tools.changed", map[string]any{"server": "f"})
			fake.Publish("relative/dir", "mcp.tools.changed", map[string]any{"server": "f"})
			fake.Publish("", "session.updated", nil)
			fake.Publish("global", "session.status", nil)
			fake.PublishRaw([]byte(`{"directory": 7, "payload": {"type": "mcp.tools.changed"}}`))
		} else {
			// 2.x: the same kinds of event in its envelope, plus what
			// 2.x adds: mcp.tools.changed and mcp.resources.changed are
			// not state changes, location.shutdown of an unarmed
			// location, events without a location or with one of
			// another shape, and a 1.x frame (no "type").
			fake.Publish(d, "project.updated", map[string]any{"id": "p", "worktree": d})
			fake.Publish(d, "server.connected", nil)
			fake.Publish(d, "installation.updated", nil)
			fake.Publish(d, "file.edited", map[string]any{"file": d + "/x"})
			fake.Publish(d, "lsp.updated", nil)
			fake.Publish(d, "mcp.tools.changed", map[string]any{"server": "f"})
			fake.Publish(d, "mcp.resources.changed", map[string]any{"server": "f"})
			fake.Publish(d, "location.shutdown", nil)
			fake.Publish("", "location.shutdown", nil)
			fake.Publish("", "mcp.status.changed", map[string]any{"server": "f"})
			fake.Publish("relative/dir", "mcp.status.changed", map[string]any{"server": "f"})
			fake.Publish("", "session.execution.started", map[string]any{"sessionID": "ses_1"})
			fake.Publish("global", "session.execution.started", map[string]any{"sessionID": "ses_1"})
			fake.PublishRaw([]byte(`{"id":"e","type":"mcp.status.changed","location":{"directory":7},"data":{"server":"f"}}`))
			fake.PublishRaw([]byte(`{"id":"e","type":"mcp.status.changed","location":"` + d + `","data":{"server":"f"}}`))
			fake.PublishRaw([]byte(`{"directory":"` + d + `","payload":{"type":"mcp.tools.changed","properties":{"server":"f"}}}`))
		}
		fake.PublishRaw([]byte(`not json`))
		fake.PublishRaw([]byte(`["array"]`))
		r.at(5 * time.Minute)
		if reqs := r.perDirRequests(); len(reqs) != 0 {
			t.Fatalf("per-directory requests before arming: %+v", reqs)
		}
		if len(fake.Instances()) != 0 {
			t.Fatalf("instances created: %v", fake.Instances())
		}
		if got := len(r.eng.Snapshot().Directories); got != 0 {
			t.Fatalf("%d directories armed", got)
		}
	})
}

// Rule 3: each arming event arms its directory, and its first check runs
// initial-delay later, not before; except a 1.x crash report naming a
// server (rule 4: a first crash), which is checked at once.
func TestArmingEvents(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			for _, typ := range g.new(nil).ArmingTypes() {
				t.Run(typ, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						fake := g.new(map[string]Spec{"f": {Status: "failed"}})
						r := newRig(t, fake, noJitter(), nil)
						r.stream()
						props := map[string]any{"server": "f"}
						if typ != fake.CrashType() && strings.HasPrefix(g.name, "v2") {
							props = map[string]any{"sessionID": "ses_1"}
						}
						if f2, ok := fake.(*fakeV2); ok {
							f2.Boot(dirA) // OpenCode 2 publishes only for a location it runs
						}
						fake.Publish(dirA, typ, props)
						first := time.Second
						// 1.x's mcp.tools.changed reports a closed
						// connection: a first crash, checked at once. 2.x's
						// mcp.status.changed reports any transition (a
						// start, a success, a disconnect): a wake, checked
						// initial-delay later.
						if typ == fake.CrashType() && g.name == "v1" {
							first = 0
						}
						if first > 0 {
							r.at(first - time.Millisecond)
							if n := len(r.perDirRequests()); n != 0 {
								t.Fatalf("%d requests before initial-delay", n)
							}
						}
						r.at(first + time.Millisecond)
						if n := fake.Count(routeStatus, dirA, ""); n != 1 {
							t.Fatalf("status reads at %v = %d, want 1", first, n)
						}
						if n := fake.Count(routeConnect, dirA, "f"); n != 1 {
							t.Fatalf("connects at %v = %d, want 1", first, n)
						}
					})
				})
			}
		})
	}
}

func TestScheduleJitterBounds(t *testing.T) {
	for seed := range 5 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			eachGen(t, func(t *testing.T, g generation) {
				fake := g.new(map[string]Spec{"f": {Status: "failed"}})
				cfg := DefaultConfig // jitter 0.2
				r := newRig(t, fake, cfg, nil)
				if err := r.eng.Arm(dirA, "test"); err != nil {
					t.Fatal(err)
				}
				r.at(time.Minute)
				got := r.connectTimes(dirA, "f")
				if len(got) != 5 {
					t.Fatalf("connects in first minute = %v, want 5", got)
				}
				check := func(what string, d, base time.Duration) {
					lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
					if d < lo || d > hi {
						t.Errorf("%s = %v, outside [%v, %v]", what, d, lo, hi)
					}
				}
				// A wake is jittered downwards only: [0.8 s, 1 s].
				if got[0] < 800*time.Millisecond || got[0] > time.Second {
					t.Errorf("first attempt at %v, outside [0.8s, 1s]", got[0])
				}
				for i := 1; i < len(got); i++ {
					check(fmt.Sprintf("gap %d", i), got[i]-got[i-1], cfg.Backoff.Base(i))
				}
			})
		})
	}
}

// Rule 4: delays are capped at max-delay.
func TestScheduleCappedAtMaxDelay(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		cfg := noJitter()
		cfg.Backoff.Max = 3 * time.Second
		cfg.Backoff.FastAttempts = 7
		r := newRig(t, fake, cfg, nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(20 * time.Second)
		want := secs(1, 2, 4, 7, 10, 13, 16)
		if got := r.connectTimes(dirA, "f"); !equalDurations(got, want) {
			t.Fatalf("connect times = %v, want %v", got, want)
		}
	})
}

// Rule 4: a server that stayed connected for stable-after clears its
// counter, one seen in any other state (not failed) too, and a server
// removed from the config is forgotten.
func TestCountersResetWhenHealthyAndForgottenWhenRemoved(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}, "g": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(4500 * time.Millisecond) // attempts at 1, 2, 4
		if s := r.server(dirA, "f"); s.Attempts != 3 {
			t.Fatalf("attempts = %d, want 3", s.Attempts)
		}
		// f comes back on its next connect (at 8 s).
		fake.SetAfterConnect(dirA, "f", "connected")
		r.at(25 * time.Second) // a check at 16 s saw it connected
		if s := r.server(dirA, "f"); s.Status != "connected" || s.Attempts != 4 || s.LastReconnect.IsZero() {
			t.Fatalf("after recovery: %+v, want connected, its 4 attempts kept, a reconnect time", s)
		}
		if n := len(r.eventsOf(EventReconnected)); n != 1 {
			t.Fatalf("reconnected events = %d, want 1", n)
		}
		r.at(100 * time.Second) // checks after 68 s: stable
		if s := r.server(dirA, "f"); s.Attempts != 0 {
			t.Fatalf("after stable-after: %+v, want 0 attempts", s)
		}
		// It fails again: a fresh episode, at the next check.
		fake.SetAfterConnect(dirA, "f", "")
		fake.SetStatus(dirA, "f", "failed", "Connection closed")
		before := len(r.connectTimes(dirA, "f"))
		_, _ = r.eng.Reconnect(dirA, []string{"nothing"}) // a wake that resets neither f nor g
		r.at(100*time.Second + 10*time.Millisecond)
		if s := r.server(dirA, "f"); s.Attempts != 1 {
			t.Fatalf("new episode attempts = %d, want 1", s.Attempts)
		}
		if got := len(r.connectTimes(dirA, "f")) - before; got != 1 {
			t.Fatalf("connects in new episode = %d, want 1", got)
		}
		// g is removed from the config while failing: forgotten.
		fake.RemoveServer(dirA, "g")
		r.at(140 * time.Second)
		for _, s := range r.eng.Snapshot().Directories[0].Servers {
			if s.Name == "g" {
				t.Fatalf("removed server still known: %+v", s)
			}
		}
		// It comes back failing: starts afresh at attempt 1.
		fake.AddServer(dirA, "g", Spec{Status: "failed"})
		_, _ = r.eng.Reconnect(dirA, []string{"nothing"})
		r.at(140*time.Second + 10*time.Millisecond)
		if s := r.server(dirA, "g"); s.Attempts != 1 {
			t.Fatalf("re-added server attempts = %d, want 1", s.Attempts)
		}
	})
}

// Rule 5: after the fast episode the slow tier; mcp.tools.changed naming a
// slow-tier server does not wake its directory, one naming another does.
func TestSlowTierAndItsEventRule(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"dead": {Status: "failed"}, "ok": {}})
		cfg := noJitter()
		cfg.IdleInterval = time.Minute
		r := newRig(t, fake, cfg, nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(20 * time.Second)
		if s := r.server(dirA, "dead"); s.Tier != TierSlow {
			t.Fatalf("tier = %q, want slow", s.Tier)
		}
		reads := fake.Count(routeStatus, dirA, "")
		connects := fake.Count(routeConnect, dirA, "")
		fake.ReportCrash(dirA, "dead")
		r.at(25 * time.Second)
		// An event naming a slow-tier server wakes nothing, in either
		// generation (1.x's crash report, 2.x's mcp.status.changed).
		wantReads := reads
		if got := fake.Count(routeStatus, dirA, ""); got != wantReads {
			t.Fatalf("event for a slow-tier server caused %d reads, want %d", got-reads, wantReads-reads)
		}
		if got := fake.Count(routeConnect, dirA, ""); got != connects {
			t.Fatalf("event for a slow-tier server caused %d connects", got-connects)
		}
		reads = wantReads
		fake.ReportCrash(dirA, "ok")
		r.at(26*time.Second + 10*time.Millisecond)
		if got := fake.Count(routeStatus, dirA, ""); got != reads+1 {
			t.Fatalf("event for another server caused %d reads, want 1", got-reads)
		}
		// The slow tier attempts every slow-interval after the last fast one.
		r.at(16*time.Second + 5*time.Minute + time.Second)
		if got := r.connectTimes(dirA, "dead"); len(got) != 6 || got[5] != 316*time.Second {
			t.Fatalf("connect times = %v, want a sixth at 5m16s", got)
		}
	})
}

// --slow-interval 0 gives up after the fast episode until reset.
func TestSlowIntervalZeroGivesUpUntilReset(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"dead": {Status: "failed"}})
		cfg := noJitter()
		cfg.Backoff.SlowInterval = 0
		r := newRig(t, fake, cfg, nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(time.Hour)
		if got := len(r.connectTimes(dirA, "dead")); got != 5 {
			t.Fatalf("connects = %d, want 5", got)
		}
		if s := r.server(dirA, "dead"); s.Tier != TierStopped {
			t.Fatalf("tier = %q, want stopped", s.Tier)
		}
		_, _ = r.eng.Reconnect(dirA, []string{"dead"})
		r.at(time.Hour + 10*time.Millisecond)
		if got := len(r.connectTimes(dirA, "dead")); got != 6 {
			t.Fatalf("connects after reconnect = %d, want 6", got)
		}
	})
}

// Rule 5: at most max-concurrent connects in flight across directories; a
// server that waits for a slot is not charged an attempt.
func TestBudgetAcrossDirectories(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
			"s1": {Status: "failed", ConnectDelay: 3 * time.Second},
			"s2": {Status: "failed", ConnectDelay: 3 * time.Second},
		})
		cfg := noJitter()
		r := newRig(t, fake, cfg, nil)
		var dirs []string
		for i := range 5 {
			d := fmt.Sprintf("/p/%d", i)
			dirs = append(dirs, d)
			_ = r.eng.Arm(d, "test")
		}
		r.at(2 * time.Minute)
		if m := fake.MaxConcurrentConnects(); m != 2 {
			t.Fatalf("max connects in flight = %d, want exactly 2", m)
		}
		for _, d := range dirs {
			for _, n := range []string{"s1", "s2"} {
				s := r.server(d, n)
				if got := len(r.connectTimes(d, n)); got != s.Attempts {
					t.Fatalf("%s/%s: %d attempts charged, %d connects made", d, n, s.Attempts, got)
				}
				if s.Attempts == 0 {
					t.Fatalf("%s/%s was starved", d, n)
				}
			}
		}
	})
}

// Remote connects may hold every slot but one, so a silent remote server
// cannot starve local ones.
func TestBudgetKeepsASlotForLocalServers(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
			"silent": {Status: "failed", Type: "remote", URL: "http://127.0.0.1:1/mcp", ConnectDelay: 60 * time.Second},
			"local":  {Status: "failed"},
		})
		r := newRig(t, fake, noJitter(), nil)
		for i := range 3 {
			_ = r.eng.Arm(fmt.Sprintf("/p/%d", i), "test")
		}
		r.at(30 * time.Second)
		for i := range 3 {
			d := fmt.Sprintf("/p/%d", i)
			if got := len(r.connectTimes(d, "local")); got != 5 {
				t.Errorf("%s: local connects = %d, want 5 (not starved by silent remotes)", d, got)
			}
		}
		if got := fake.Count(routeConnect, "", "silent"); got != 1 {
			t.Errorf("silent remote connects in flight = %d, want 1 (the others wait for the remote share)", got)
		}
	})
}

// Rules 6 and 7: an event storm during a slow check causes no concurrent
// check and one follow-up at most; activity wakes at most once per idle
// interval.
func TestSingleFlightUnderEventStorm(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"ok": {}})
		cfg := noJitter()
		r := newRig(t, fake, cfg, nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second) // first check at 1 s
		fake.SetStatusDelay(2 * time.Second)
		base := fake.Count(routeStatus, dirA, "")
		// A streaming reply: many events a second for 20 seconds.
		types := []string{"message.part.updated", "session.status", "mcp.tools.changed"}
		if strings.HasPrefix(g.name, "v2") {
			types = []string{"session.text.delta", "session.step.started", "mcp.status.changed"}
		}
		for i := range 400 {
			fake.Publish(dirA, types[i%3], map[string]any{"server": "ok"})
			time.Sleep(50 * time.Millisecond)
		}
		synctest.Wait()
		if m := fake.MaxConcurrentReads(); m != 1 {
			t.Fatalf("max concurrent status reads for one directory = %d, want 1", m)
		}
		// Each check takes 2 s; wakes during a check are honoured once it
		// finishes, so checks run back to back: at most 11 over the 20 s
		// storm of 400 events, never one per event.
		if got := fake.Count(routeStatus, dirA, ""); got-base > 11 || got-base < 5 {
			t.Fatalf("status reads during the storm = %d, want 5..11", got-base)
		}
	})
}

func TestActivityWakesAtMostOncePerIdleInterval(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"ok": {}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		if f2, ok := fake.(*fakeV2); ok {
			f2.Boot(dirA) // OpenCode 2 publishes only for a location it runs
		}
		fake.Publish(dirA, "session.created", nil) // arms (in both generations); check at 1 s
		r.at(1500 * time.Millisecond)
		if n := fake.Count(routeStatus, dirA, ""); n != 1 {
			t.Fatalf("reads after arming = %d, want 1", n)
		}
		typ := "message.part.updated"
		if strings.HasPrefix(g.name, "v2") {
			typ = "session.text.delta"
		}
		for range 600 { // 60 s of activity, 10 events a second
			fake.Publish(dirA, typ, nil)
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		// Idle checks at 31 s and 61 s; activity wakes at most once per 30 s:
		// at 30 s (1 s later) — anything more is a read per event.
		if n := fake.Count(routeStatus, dirA, ""); n < 3 || n > 4 {
			t.Fatalf("reads over 61.5 s of activity = %d, want 3 or 4", n)
		}
	})
}

// Rule 6: a wake never pushes an already scheduled check later.
func TestWakeNeverPostpones(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		cfg := noJitter()
		cfg.Backoff.Initial = 5 * time.Second
		cfg.Backoff.Max = 30 * time.Second
		r := newRig(t, fake, cfg, nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test") // first check at 5 s
		r.at(4 * time.Second)
		fake.ReportCrash(dirA, "f") // would be 9 s
		r.at(5*time.Second + 10*time.Millisecond)
		if n := fake.Count(routeStatus, dirA, ""); n != 1 {
			t.Fatalf("check at 5 s did not run (reads = %d)", n)
		}
	})
}

// Rule 8: dispose stops every request for the directory; re-arming works.
func TestDisposeStopsAndRearmWorks(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed", ConnectDelay: 500 * time.Millisecond}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		// Armed by a client's activity, not named by the user: an OpenCode
		// 2 without location.shutdown then forgets it once its next check
		// finds the location gone.
		fake.Activity(dirA)
		_ = r.eng.Arm("/other", "test")
		r.at(1200 * time.Millisecond) // connect in flight
		fake.Dispose(dirA)
		synctest.Wait()
		fake.ResetRequests()
		r.at(10 * time.Minute)
		if n := fake.Count("", dirA, ""); n != 0 {
			t.Fatalf("%d requests for a disposed directory", n)
		}
		if n := fake.Count("", "/other", ""); n == 0 {
			t.Fatal("the other directory stopped too")
		}
		for _, d := range fake.Instances() {
			if d == dirA {
				t.Fatal("the daemon recreated the disposed instance")
			}
		}
		if n := len(r.eventsOf(EventDisarmed)); n != 1 {
			t.Fatalf("disarmed events = %d, want 1", n)
		}
		if g.name == "v1" {
			// A crash event arms it again (and is checked at once: a first crash).
			fake.ReportCrash(dirA, "f")
			r.at(10*time.Minute + 100*time.Millisecond)
		} else {
			// 2.x: an evicted location sends no MCP events (nothing runs
			// there); a session event arms it again, checked
			// initial-delay later.
			fake.Activity(dirA)
			r.at(10*time.Minute + time.Second + 100*time.Millisecond)
		}
		if n := fake.Count(routeStatus, dirA, ""); n != 1 {
			t.Fatalf("reads after re-arming = %d, want 1", n)
		}
		if noShutdownEvent(fake) {
			// The preview reboots every location at a reload and
			// announces no shutdown: they stay booted, and armed.
			return
		}
		// global.disposed forgets everything (2.x: a reload shuts every
		// location down, each with location.shutdown).
		fake.DisposeAll()
		synctest.Wait()
		if n := len(r.eng.Snapshot().Directories); n != 0 {
			t.Fatalf("%d directories after global.disposed", n)
		}
		fake.ResetRequests()
		r.at(20 * time.Minute)
		if n := len(r.perDirRequests()); n != 0 {
			t.Fatalf("%d per-directory requests after global.disposed", n)
		}
	})
}

// Rule 9: a failing, garbled or hanging status read keeps every counter
// and is retried at the idle interval, never read as "no servers".
func TestUnavailableStatusKeepsCounters(t *testing.T) {
	// Each case answers GET /mcp (1.x) or GET /api/mcp (2.x); a generation
	// with no body for a case does not run it.
	type answer struct {
		code   int
		v1, v2 *string
		hang   bool
	}
	both := func(code int, body string) answer { return answer{code: code, v1: &body, v2: &body} }
	each := func(v1, v2 string) answer { return answer{code: 200, v1: &v1, v2: &v2} }
	only2 := func(v2 string) answer { return answer{code: 200, v2: &v2} }
	cases := map[string]answer{
		"500":       both(500, "oops"),
		"502":       both(502, ""),
		"non-JSON":  both(200, "<html>"),
		"array":     both(200, `["f"]`),
		"null":      both(200, `null`),
		"empty":     both(200, ``),
		"bad entry": each(`{"f": "failed"}`, `{"location":{"directory":"`+dirA+`"},"data":[{"name":"f","status":"failed"}]}`),
		"no status": each(`{"f": {}}`, `{"location":{"directory":"`+dirA+`"},"data":[{"name":"f","status":{}}]}`),
		"hang":      {hang: true, v1: new(string), v2: new(string)},
		"truncated": each(`{"f": {"status": "fai`, `{"location":{"directory":"`+dirA+`"},"data":[{"name":"f","status":{"status":"fai`),
		// 2.x only: an answer without its data array, and one for
		// another location (a server that ignored location[directory]
		// answers for its own $HOME), are not "no servers".
		"no data":        only2(`{"location":{"directory":"` + dirA + `"}}`),
		"other location": only2(`{"location":{"directory":"/home/fake"},"data":[]}`),
		"1.x shape":      only2(`{"f": {"status": "connected"}}`),
	}
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			for _, g := range generations {
				body := a.v1
				if strings.HasPrefix(g.name, "v2") {
					body = a.v2
				}
				if body == nil {
					continue
				}
				override := func(string) (int, string, bool) { return a.code, *body, a.hang }
				t.Run(g.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						fake := g.new(map[string]Spec{"f": {Status: "failed"}})
						cfg := noJitter()
						r := newRig(t, fake, cfg, nil)
						_ = r.eng.Arm(dirA, "test")
						r.at(2500 * time.Millisecond) // attempts at 1 and 2 s
						fake.SetStatusOverride(override)
						r.at(3 * time.Minute)
						fake.SetStatusOverride(nil)
						s := r.server(dirA, "f")
						if s.Attempts != 2 || s.Status != "failed" {
							t.Fatalf("after unavailable status: %+v, want 2 attempts kept", s)
						}
						if got := len(r.connectTimes(dirA, "f")); got != 2 {
							t.Fatalf("connects while status unavailable: %d, want none beyond 2", got-2)
						}
						reads := fake.Count(routeStatus, dirA, "")
						// 4 good reads (before the attempts at 1 and 2 s and
						// of their outcomes), then one at 4 s and one every
						// idle interval (30 s), each bounded by the client
						// timeout when hanging.
						if reads < 6 || reads > 11 {
							t.Fatalf("reads = %d, want about one per idle interval", reads)
						}
						if d := r.eng.Snapshot().Directories[0]; d.LastError == "" {
							t.Fatal("snapshot shows no error for an unavailable status")
						}
						// When status is readable again the episode continues at attempt 3.
						_, _ = r.eng.Reconnect(dirA, []string{"unrelated"})
						r.at(3*time.Minute + 100*time.Millisecond)
						if s := r.server(dirA, "f"); s.Attempts != 3 {
							t.Fatalf("attempts after recovery = %d, want 3", s.Attempts)
						}
					})
				})
			}
		})
	}
}

// A wrong password is reported clearly and not hammered.
func TestUnauthorizedIsNotHammered(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		fake.ChangePassword("right")
		r := newRig(t, fake, noJitter(), nil)
		// The rig's client sends "right"; swap in a wrong one.
		fake.ChangePassword("other")
		_ = r.eng.Arm(dirA, "test")
		r.at(10 * time.Minute)
		// One per idle interval (20) and the first check's config read;
		// on OpenCode 2 also its API description, read once per detection.
		limit := 21
		if strings.HasPrefix(g.name, "v2") {
			limit = 22
		}
		if n := fake.Count(route401, "", ""); n > limit {
			t.Fatalf("%d refused requests in 10 minutes; want at most one per idle interval", n)
		}
		d := r.eng.Snapshot().Directories[0]
		if !strings.Contains(d.LastError, "401") || !strings.Contains(d.LastError, "OPENCODE_SERVER_PASSWORD") {
			t.Fatalf("last error = %q, want the status and the fix", d.LastError)
		}
		if strings.Contains(d.LastError, "right") {
			t.Fatal("the password leaked into the error")
		}
	})
}

// Names and directories with spaces, unicode and slashes round-trip.
func TestOddNamesRoundTrip(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		names := []string{"with space", "ünï/cødé", "a/b", "%41?x#y", "emoji 🚀", "a+b=c&d[e]"}
		specs := map[string]Spec{}
		for _, n := range names {
			specs[n] = Spec{Status: "failed", AfterConnect: "connected"}
		}
		fake := g.new(specs)
		r := newRig(t, fake, noJitter(), nil)
		dirs := []string{"/home/u/my project", "/tmp/ünï cødé/x", "/a/b?c=d&e#f", "/x/a+b=[c]&%2F;y"}
		for _, d := range dirs {
			if err := r.eng.Arm(d, "test"); err != nil {
				t.Fatal(err)
			}
		}
		r.at(3 * time.Second)
		for _, d := range dirs {
			for _, n := range names {
				if got := len(r.connectTimes(d, n)); got != 1 {
					t.Errorf("%q in %q: %d connects, want 1", n, d, got)
				}
				if s := r.server(d, n); s.Status != "connected" {
					t.Errorf("%q in %q: status %q", n, d, s.Status)
				}
			}
		}
		if f2, ok := fake.(*fakeV2); ok {
			// 2.x: every location went in location[directory], exactly
			// (not the header, not 1.x's ?directory=, which 2.x ignores
			// and would answer for $HOME).
			for _, q := range f2.Server.Requests() {
				if q.Directory == "" {
					continue
				}
				v, err := url.ParseQuery(q.RawQuery)
				if err != nil || q.ViaHeader || q.LegacyDirectory != "" || len(v["location[directory]"]) != 1 || v.Get("location[directory]") != q.Directory || !slices.Contains(dirs, q.Directory) {
					t.Errorf("%s %s?%s named its location as %+v", q.Method, q.Route, q.RawQuery, q)
				}
			}
		}
	})
}

// Rule 2: each directory has its own loop and counters; the same server
// name failing in two directories keeps two independent schedules.
func TestDirectoriesNeverShareBackoff(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm("/a", "test")
		r.at(3 * time.Second) // a: attempts at 1 and 2 s
		_ = r.eng.Arm("/b", "test")
		r.at(40 * time.Second)
		if got, want := r.connectTimes("/a", "f"), secs(1, 2, 4, 8, 16); !equalDurations(got, want) {
			t.Errorf("/a connects = %v, want %v", got, want)
		}
		if got, want := r.connectTimes("/b", "f"), secs(4, 5, 7, 11, 19); !equalDurations(got, want) {
			t.Errorf("/b connects = %v, want %v", got, want)
		}
	})
}

// A network change checks every failed server in every armed directory
// at once, outside its backoff (charged to its episode: in the slow tier
// once max-delay has passed since its last attempt), and touches nothing
// else.
func TestNetworkChangeRetriesFailedServersNow(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}, "ok": {}, "off": {Status: "disabled"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm("/a", "test")
		_ = r.eng.Arm("/b", "test")
		r.at(time.Minute) // both in the slow tier: next attempts at 5m16s
		r.eng.NetworkChanged()
		r.at(time.Minute + 10*time.Millisecond)
		for _, d := range []string{"/a", "/b"} {
			got := r.connectTimes(d, "f")
			if len(got) != 6 || got[5] != time.Minute {
				t.Errorf("%s connects = %v, want a sixth at once", d, got)
			}
			if s := r.server(d, "f"); s.Attempts != 6 || s.Tier != TierSlow {
				t.Errorf("%s: %+v, want the attempt charged to its slow-tier episode", d, s)
			}
		}
		// Another change within max-delay buys nothing.
		r.eng.NetworkChanged()
		r.at(time.Minute + 20*time.Second)
		if got := r.connectTimes("/a", "f"); len(got) != 6 {
			t.Errorf("connects = %v after a second change within max-delay", got)
		}
		if n := fake.Count(routeConnect, "", "ok") + fake.Count(routeConnect, "", "off"); n != 0 {
			t.Fatalf("%d connects of servers that were not failed", n)
		}
		if n := len(r.eventsOf(EventNetworkChanged)); n != 2 {
			t.Fatalf("network.changed events = %d", n)
		}
	})
}
