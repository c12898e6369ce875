package reconnect

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// With several OpenCode servers in one daemon, connects that hang on one
// server (a silent remote URL holds its slot for a minute) never starve
// another: the remote sub-limit is each server's share, not the daemon's
// (with the default --max-concurrent 2, a global remote limit would be 1).
func TestRemoteLimitIsPerServer(t *testing.T) {
	b := NewBudget(DefaultConfig.MaxConcurrent) // 2, the default
	serverA, serverB := b.Share(), b.Share()
	if !serverA.TryTake(true) { // A: a connect to a silent remote URL, held ~60 s
		t.Fatal("server A could not start its remote connect on an empty budget")
	}
	if !serverB.TryTake(true) {
		t.Fatalf("server B's remote connect waits behind server A's hanging remote connect: budget max %d, in use %+v, B holds 0",
			b.max, b.all)
	}
}

// A silent remote server can delay other remote servers, never a local
// one: with --max-concurrent 1 the remote connect gets a slot of its own
// beside the local one, so it never holds the only slot (and a second
// remote connect still waits).
func TestMaxConcurrentOneKeepsTheSlotForLocal(t *testing.T) {
	b := NewBudget(1)
	s := b.Share() // the daemon's one server
	if !s.TryTake(true) {
		t.Fatal("remote connect refused on an empty budget")
	}
	if !s.TryTake(false) {
		t.Fatalf("a local connect waits behind a remote one with --max-concurrent 1 (in use %+v)", b.all)
	}
	if s.TryTake(true) || s.TryTake(false) {
		t.Fatalf("with --max-concurrent 1 a second remote or local connect started (in use %+v)", b.all)
	}
}

// The same at the engine level: two OpenCode servers in one daemon (one
// budget, default --max-concurrent 2). Server A's failed remote server
// has a silent URL (its connect takes 60 s); server B's failed remote
// server answers at once and connects at its first check, not a minute
// later behind A's.
func TestSilentRemoteOnOneServerDoesNotDelayRemoteOnAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cfg := noJitter()
		budget := NewBudget(cfg.MaxConcurrent)
		a, b := newStub(), newStub()
		a.set("/a", "silent", "failed")
		a.config["silent"] = opencode.MCPEntry{Type: "remote", URL: "http://10.0.0.1:9/mcp"}
		a.delay["silent"] = 60 * time.Second
		b.set("/b", "api", "failed")
		b.config["api"] = opencode.MCPEntry{Type: "remote", URL: "http://10.0.0.2:9/mcp"}
		b.after["api"] = "connected"
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
		got := b.connectTimes("/b", "api", start)
		if len(got) == 0 || got[0] > 2*time.Second {
			t.Fatalf("server B's remote server connected at %v (want ~1.5 s, its first check): it waited for server A's silent remote connect; B's snapshot: %+v",
				got, eb.Snapshot().Directories)
		}
	})
}

// Whatever the order of acquires and releases across servers, the budget
// never has more than --max-concurrent connects in flight (with 1: one
// local and one remote), and no server holds more remote slots than its
// share allows.
func TestBudgetBoundsHoldUnderAnyOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 5} {
		for _, servers := range []int{1, 2, 3} {
			b := NewBudget(n)
			shares := make([]*Share, servers)
			held := make([]pool, servers)
			for i := range shares {
				shares[i] = b.Share()
			}
			shareCap := max(1, n-(servers-1))
			for range 2000 {
				i := rnd.IntN(servers)
				remote := rnd.IntN(2) == 0
				h := &held[i]
				if rnd.IntN(3) == 0 && (remote && h.remote > 0 || !remote && h.local > 0) {
					shares[i].Release(remote)
					h.add(remote, -1)
				} else if shares[i].TryTake(remote) {
					h.add(remote, 1)
				}
				total := pool{}
				for _, p := range held {
					total.local += p.local
					total.remote += p.remote
					if p.remote > max(1, shareCap-1) {
						t.Fatalf("n=%d servers=%d: a server holds %d remote slots (share %d)", n, servers, p.remote, shareCap)
					}
					if n > 1 && p.local+p.remote > shareCap {
						t.Fatalf("n=%d servers=%d: a server holds %+v, over its share of %d", n, servers, p, shareCap)
					}
				}
				if n == 1 && (total.local > 1 || total.remote > 1) || n > 1 && total.local+total.remote > n {
					t.Fatalf("n=%d servers=%d: %+v in flight", n, servers, total)
				}
			}
		}
	}
}
