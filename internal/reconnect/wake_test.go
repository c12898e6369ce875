package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// A wake from sleep renews every connected remote server's session (a
// connect), leaves connected local servers alone, checks failed servers
// as a network change does, and is charged like one: a second wake within
// max-delay renews nothing.
func TestWakeRenewsRemoteSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "remote", "connected")
		oc.set("/p", "local", "connected")
		oc.set("/p", "down", "failed")
		oc.config["remote"] = opencode.MCPEntry{Type: "remote", URL: "http://remote.test:9000/mcp"}
		oc.config["local"] = opencode.MCPEntry{Type: "local", Command: []string{"x"}}
		oc.config["down"] = opencode.MCPEntry{Type: "remote", URL: "http://down.test:9000/mcp"}
		cfg := noJitter()
		cfg.Backoff.SlowInterval = 0 // down is stopped after its fast episode: no attempt at all
		e, err := New(cfg, oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		woke := time.Now()
		e.Woke()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := after(oc.connectTimes("/p", "remote", woke)); len(got) != 1 {
			t.Fatalf("remote connects after the wake = %v, want one", got)
		}
		if got := after(oc.connectTimes("/p", "local", woke)); len(got) != 0 {
			t.Fatalf("local connects after the wake = %v, want none", got)
		}
		if got := after(oc.connectTimes("/p", "down", woke)); len(got) != 0 {
			t.Fatalf("a stopped server was connected after the wake: %v", got)
		}
		time.Sleep(5 * time.Second)
		e.Woke() // within max-delay of the last
		time.Sleep(time.Second)
		synctest.Wait()
		if got := after(oc.connectTimes("/p", "remote", woke)); len(got) != 1 {
			t.Fatalf("remote connects after two wakes 5 s apart = %v, want one (at most one per max-delay)", got)
		}
	})
}

// after keeps the times at or after zero.
func after(ds []time.Duration) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		if d >= 0 {
			out = append(out, d)
		}
	}
	return out
}

// forget drops the endpoint's side of every connection without closing
// it: after the machine slept, a connection the server lost (it restarted
// meanwhile, and its reset never arrived) stays open here, and silent.
func (ep *endpoint) forget() {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.conns = nil
}

// After a wake, every endpoint watch is dialled anew, also one shared
// with a server the wake did not renew (in /b its episode is stopped:
// slow-interval 0 after its fast episode, connected again by someone
// else and not yet stable): the held connection from before the sleep
// may be dead without a word, and a watch over it would miss the
// server's next restart. Before, the watch went on over the dead
// connection (/b still subscribed to it) and the restart at 60 s repaired
// nothing.
func TestWakeRedialsSharedEndpointWatches(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		const url = "http://r.test:9000/mcp"
		ep := &endpoint{}
		ep.up.Store(true)
		fake := g.new(map[string]Spec{"r": {Status: "connected", Type: "remote", URL: url, AfterConnect: "connected"}})
		fake.SetDirConfig("/b", map[string]Spec{"r": {Status: "failed", Type: "remote", URL: url}})
		cfg := noJitter()
		cfg.Backoff.SlowInterval = 0
		r := newRigFlapping(t, fake, cfg, Options{}, ep)
		_ = r.eng.Arm("/a", "test")
		_ = r.eng.Arm("/b", "test")
		r.at(25 * time.Second)
		if s := r.server("/b", "r"); s.Tier != TierStopped {
			t.Fatalf("setup: /b r = %+v, want stopped", s)
		}
		fake.SetStatus("/b", "r", "connected", "") // someone else connected it
		r.at(49 * time.Second)                     // /b's idle check saw it: its watch shares /a's
		if s := r.server("/b", "r"); s.Status != "connected" {
			t.Fatalf("setup: /b r = %+v, want connected", s)
		}
		ep.forget() // the machine slept
		r.at(50 * time.Second)
		r.eng.Woke()
		r.at(55 * time.Second) // /a renewed its session
		woke := len(r.connectTimes("/a", "r"))
		if woke != 1 {
			t.Fatalf("/a connects after the wake = %v, want its renewal", r.connectTimes("/a", "r"))
		}
		// The server restarts: its connections drop, new ones are refused
		// for 3 s.
		r.at(60 * time.Second)
		ep.up.Store(false)
		ep.close()
		r.at(63 * time.Second)
		ep.up.Store(true)
		r.at(66 * time.Second)
		if got := r.connectTimes("/a", "r"); len(got) != woke+1 || got[woke] < 63*time.Second {
			t.Fatalf("/a connects = %v, want one more soon after the endpoint came back at 63 s", got)
		}
	})
}
