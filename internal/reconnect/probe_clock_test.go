package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// A failed remote server's endpoint is probed at the pace of its own
// failure's age (every second in its first minute, every 1.5 s in its
// second: probe.Interval), whatever other directories using the same
// endpoint have seen: its recovery comes within about a second or two of
// the endpoint answering again. Here /a's server has failed (its
// endpoint down) for ten minutes, so probes for it have eased off to
// every 30 s; /b's server, on the same endpoint, failed about two
// minutes ago and is in the slow tier (its next scheduled attempt minutes
// away). When the endpoint answers, /b is connected within a few
// seconds, not when /a's eased-off probe happens to come.
func TestProbesOfANewlyFailedServerDoNotInheritAnotherDirectorysEasedOffPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ep := &endpoint{}
		oc := newStub()
		oc.config["r"] = opencode.MCPEntry{Type: "remote", URL: "http://r.test:9000/mcp"}
		oc.set("/a", "r", "failed")
		oc.set("/b", "r", "failed")
		cfg := noJitter()
		e, err := New(cfg, oc, Options{Budget: NewBudget(cfg.MaxConcurrent), URL: "http://oc", Prober: newTestProber(ep)})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		_ = e.Arm("/a", ArmedByFlag)
		time.Sleep(600 * time.Second)
		_ = e.Arm("/b", ArmedByFlag)
		time.Sleep(100 * time.Second) // /b: five fast attempts by 616 s, then the slow tier
		synctest.Wait()
		// The endpoint comes back right after a probe, whichever
		// directory's it was.
		for n := ep.dials.Load(); ep.dials.Load() == n; {
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
		}
		back := time.Now()
		ep.up.Store(true)
		before := len(oc.connectTimes("/b", "r", start))
		time.Sleep(40 * time.Second)
		synctest.Wait()
		got := oc.connectTimes("/b", "r", start)
		if len(got) <= before {
			t.Fatalf("/b's server was not connected within 40 s of its endpoint answering at %v (connects %v)", back.Sub(start), got)
		}
		if after := got[before] - back.Sub(start); after > 3*time.Second {
			t.Fatalf("/b's server, failed for %v, was connected %v after its endpoint answered again (want about a second): its probes run at /a's eased-off pace",
				back.Sub(start)-601*time.Second, after)
		}
	})
}

// A remote server the read no longer lists (removed from the config) is
// forgotten with everything that watches it: its endpoint is no longer
// probed, neither while its directory stays armed nor after it is
// disarmed.
func TestUnlistedFailedRemoteServerIsNoLongerProbed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{}
		oc := newStub()
		oc.config["r"] = opencode.MCPEntry{Type: "remote", URL: "http://r.test:9000/mcp"}
		oc.config["l"] = opencode.MCPEntry{Type: "local"}
		oc.set("/a", "r", "failed")
		oc.set("/a", "l", "connected")
		cfg := noJitter()
		e, err := New(cfg, oc, Options{Budget: NewBudget(cfg.MaxConcurrent), URL: "http://oc", Prober: newTestProber(ep)})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		_ = e.Arm("/a", ArmedByFlag)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if ep.dials.Load() == 0 {
			t.Fatal("the failed remote server's endpoint was never probed")
		}
		// The user removes r from the config: the next read no longer
		// lists it.
		oc.mu.Lock()
		delete(oc.status["/a"], "r")
		oc.mu.Unlock()
		if _, err := e.Reconnect("/a", nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for _, s := range e.Snapshot().Directories[0].Servers {
			if s.Name == "r" {
				t.Fatalf("r is still known after a read that does not list it: %+v", s)
			}
		}
		n := ep.dials.Load()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := ep.dials.Load() - n; got != 0 {
			t.Fatalf("the endpoint of r, which no read lists any more, was probed %d times in the 5 minutes after it was forgotten", got)
		}
		e.Disarm("/a", "test")
		n = ep.dials.Load()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := ep.dials.Load() - n; got != 0 {
			t.Fatalf("the endpoint of r was probed %d times in the 5 minutes after its directory was disarmed", got)
		}
	})
}
