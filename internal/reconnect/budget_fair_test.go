package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// No server starves another: the Budget's
// own promise ("while n servers share the budget, one may hold at most all
// slots but n-1 ... so connects that hang on one server never starve
// another"). With the default --max-concurrent 2 and two OpenCode servers
// each share is one slot, and Pool.fits gives a one-slot pool one local
// AND one remote connect: server A, with a local server whose start hangs
// (2.x: up to timeout.startup + timeout.catalog, 60 s) and a silent remote
// URL, holds both of the daemon's slots, and server B's crashed local
// server waits a minute behind it.
func TestOneServerCannotHoldEverySlot(t *testing.T) {
	b := NewBudget(DefaultConfig.MaxConcurrent) // 2
	serverA, serverB := b.Share(), b.Share()
	if !serverA.TryTake(false) {
		t.Fatal("server A could not take a local slot on an empty budget")
	}
	if serverA.TryTake(true) {
		t.Fatalf("server A took a remote slot beside its local one: it holds every slot of the daemon (in use %+v, budget %d, 2 servers)", b.all, b.max)
	}
	if !serverB.TryTake(false) {
		t.Fatalf("server B cannot start a local connect: server A holds every slot of the daemon (in use %+v, budget %d, 2 servers)", b.all, b.max)
	}
}

// The same through two engines sharing one budget.
func TestHangingServerDoesNotStarveAnotherEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cfg := noJitter()
		budget := NewBudget(cfg.MaxConcurrent)
		a, b := newStub(), newStub()
		a.set("/a", "hang", "failed") // a stdio server that never finishes its handshake
		a.config["hang"] = opencode.MCPEntry{Type: "local"}
		a.delay["hang"] = 60 * time.Second
		a.set("/a", "silent", "failed") // a remote URL that accepts TCP and never answers
		a.config["silent"] = opencode.MCPEntry{Type: "remote", URL: "http://10.0.0.1:9/mcp"}
		a.delay["silent"] = 60 * time.Second
		b.set("/b", "fs", "failed")
		b.config["fs"] = opencode.MCPEntry{Type: "local"}
		b.after["fs"] = "connected"
		ea, err := New(cfg, a, Options{Budget: budget, URL: "http://a"})
		if err != nil {
			t.Fatal(err)
		}
		eb, err := New(cfg, b, Options{Budget: budget, URL: "http://b"})
		if err != nil {
			t.Fatal(err)
		}
		stopA, stopB := runEngine(ea), runEngine(eb)
		defer stopB()
		defer stopA()
		synctest.Wait()
		_ = ea.Arm("/a", ArmedByFlag)
		time.Sleep(500 * time.Millisecond)
		_ = eb.Arm("/b", ArmedByFlag)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := b.connectTimes("/b", "fs", start); len(got) == 0 || got[0] > 2*time.Second {
			t.Fatalf("server B's crashed local server connected at %v (want ~1.5 s, its first check): server A's two hanging connects hold both slots", got)
		}
	})
}
