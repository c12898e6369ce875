package reconnect

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// The connect budget (budget.go) and the engine's slot line
// (connect.go): the policy's bounds, fairness between servers, and what a
// directory that finds no slot, or ends, does with slots.

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

// Budget slots and directories that end. A slot is held only by a connect
// in flight: a directory that waits for one holds nothing, and one that
// ends (disposed, disarmed) while its connect is in flight gets the slot
// back when the connect returns. A slot lost any other way is lost for
// the daemon's lifetime, and with --max-concurrent 1 every connect of
// every directory stops.

// holdAll takes every slot of the budget for the test through b (a share
// of another engine, whose connects hold them), so directories wait.
func holdAll(t *testing.T, b *Share, n int) {
	t.Helper()
	for range n {
		if !b.TryTake(false) {
			t.Fatal("budget has fewer free slots than it should")
		}
	}
}

// allFree reports whether all n slots of the budget are free to b (a
// share of it), leaving them free.
func allFree(b *Share, n int) bool {
	got := 0
	for range n {
		if b.TryTake(false) {
			got++
		}
	}
	for range got {
		b.Release(false)
	}
	return got == n
}

// A directory disposed while it waits for a slot is never read again: the
// slot freed next goes to the directory that still waits, at once, and
// nothing stays taken.
func TestDisposedDirectoryWaitingForASlotIsNeverReadAgain(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		other := b.Share() // another engine's
		holdAll(t, other, 1)
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), b)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		_ = r.eng.Arm("/b", "test")
		r.at(2 * time.Second)
		if !r.server(dirA, "f").WaitingForSlot || !r.server("/b", "f").WaitingForSlot {
			t.Fatalf("%+v %+v: the test wants both directories waiting", r.server(dirA, "f"), r.server("/b", "f"))
		}
		if noShutdownEvent(fake) {
			r.eng.Disarm(dirA, "disposed") // what its next check would do (locations.go)
		} else {
			fake.Dispose(dirA)
		}
		r.at(2*time.Second + 10*time.Millisecond)
		if len(r.eng.Snapshot().Directories) != 1 {
			t.Fatalf("%+v: the disposed directory is still armed", r.eng.Snapshot().Directories)
		}
		reads := fake.Count(routeStatus, dirA, "")
		other.Release(false)
		r.at(2*time.Second + 20*time.Millisecond)
		if got := r.connectTimes("/b", "f"); len(got) != 1 {
			t.Fatalf("/b connects = %v, want one as soon as the slot was freed", got)
		}
		r.at(time.Minute)
		if n := fake.Count(routeStatus, dirA, "") - reads; n != 0 || len(r.connectTimes(dirA, "f")) != 0 {
			t.Fatalf("the disposed directory was read %d times or connected after the dispose", n)
		}
		if !allFree(other, 1) {
			t.Fatal("a slot stayed taken after the connect returned")
		}
	})
}

// A directory disarmed while its connect is in flight gets its slot back
// when the connect returns.
func TestDirectoryDisarmedDuringItsConnectReturnsTheSlot(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		fake := g.new(map[string]Spec{"f": {Status: "failed", ConnectDelay: 5 * time.Second}})
		r := newRig(t, fake, noJitter(), b)
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second)
		if allFree(r.eng.budget, 1) || len(r.connectTimes(dirA, "f")) != 1 {
			t.Fatal("the test wants the directory's connect in flight")
		}
		r.eng.Disarm(dirA, "test")
		r.at(10 * time.Second)
		if !allFree(r.eng.budget, 1) {
			t.Fatal("the slot of the disarmed directory's connect is lost")
		}
	})
}

// A directory woken by a freed slot whose fresh read needs no connect (the
// server came back meanwhile) takes no slot, and passes the wake on to the
// directory waiting behind it; so does one disarmed before its check.
func TestSlotNotNeededByTheCheckGoesToTheNextWaiting(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		other := b.Share() // another engine's
		holdAll(t, other, 1)
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), b)
		_ = r.eng.Arm(dirA, "test")
		r.at(100 * time.Millisecond)
		_ = r.eng.Arm("/b", "test")
		r.at(2 * time.Second)
		if !r.server(dirA, "f").WaitingForSlot || !r.server("/b", "f").WaitingForSlot {
			t.Fatal("the test wants both directories waiting for a slot, A first")
		}
		fake.SetStatus(dirA, "f", "connected", "")
		other.Release(false)
		r.at(2*time.Second + 10*time.Millisecond)
		if s := r.server(dirA, "f"); s.Status != "connected" || s.WaitingForSlot || len(r.connectTimes(dirA, "f")) != 0 {
			t.Fatalf("%+v: the test wants the check that used no slot", s)
		}
		if got := r.connectTimes("/b", "f"); len(got) != 1 {
			t.Fatalf("/b connects = %v, want one as soon as A passed the slot on", got)
		}
		r.at(time.Minute)
		if !allFree(other, 1) {
			t.Fatal("a slot stayed taken")
		}
	})
}

// Rule 7 says a check connects only what its fresh read shows
// failed (the restart repair aside, which needs a restart seen by the
// watch). When a probe-triggered attempt of a failed remote server finds
// no budget slot, connect keeps the trigger as trigOf(Extra) =
// trigProbe|trigRestart: it invents a restart. If the read that a freed
// slot causes shows the server connected (the user connected it, another
// client did), the invented restart fires and the healthy server is
// connected again (a new session; for OpenCode a stop and start).
func TestSlotWaitOfProbeAttemptDoesNotReconnectConnectedServer(t *testing.T) {
	e, err := New(noJitter(), nil, Options{Budget: NewBudget(1)})
	if err != nil {
		t.Fatal(err)
	}
	if !e.budget.TryTake(true) { // another directory's connect holds the slot
		t.Fatal("budget full")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now()
	d := newDir("/p", "test", now, cancel)
	d.config = dirConfig{"r": {kind: "remote", url: "http://127.0.0.1:1/mcp"}}
	d.servers["r"] = &server{status: opencode.StatusFailed}

	// The endpoint answered again: the reconcile decided a probe attempt,
	// and connect found no free slot.
	e.connect(ctx, d, []attempt{{"r", backoff.Extra, trigProbe}})
	if c := d.servers["r"]; c.connecting || !c.slotWait {
		t.Fatalf("server state %+v, want waiting for a slot", *c)
	}

	// The slot's read shows it connected.
	e.mu.Lock()
	connects, _ := e.reconcile(d, map[string]opencode.ServerStatus{"r": {Status: opencode.StatusConnected}}, now.Add(time.Second))
	e.mu.Unlock()
	if len(connects) != 0 {
		t.Errorf("a read showing %q connected decided connects %v: a probe's slot wait became a restart repair", "r", connects)
	}
}
