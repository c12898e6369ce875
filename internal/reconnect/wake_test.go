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
