package reconnect

import (
	"context"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
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
	connects, _ := e.reconcile(d, map[string]opencode.MCPServerStatus{"r": {Status: opencode.StatusConnected}}, now.Add(time.Second))
	e.mu.Unlock()
	if len(connects) != 0 {
		t.Errorf("a read showing %q connected decided connects %v: a probe's slot wait became a restart repair", "r", connects)
	}
}

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

func (o *refusingOC) MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error) {
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

// slowReads is an ocStub whose status reads of some directories take a
// while (a busy OpenCode instance): the time between a directory's wake
// and its decision.
type slowReads struct {
	*ocStub
	mu   sync.Mutex
	read map[string]time.Duration // status read duration by directory
}

func (o *slowReads) MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error) {
	o.mu.Lock()
	d := o.read[dir]
	o.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return o.ocStub.MCPStatus(ctx, dir)
}

// A directory waiting for a connect slot is served first come first
// served: the slot released while it waits is its, and a directory that
// comes due later (its check reads faster) does not take it in the time
// the waiting directory's fresh read takes. Here the overtaker's connect
// hangs (a stdio start that never finishes its handshake): taking the
// slot would keep the directory that waited first from connecting for a
// minute.
func TestSlotReleasedToAWaitingDirectoryIsNotTakenByALaterOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cfg := noJitter()
		cfg.MaxConcurrent = 1
		oc := &slowReads{ocStub: newStub(), read: map[string]time.Duration{"/a": 2 * time.Second}}
		for _, n := range []string{"x", "a", "c"} {
			oc.config[n] = opencode.MCPEntry{Type: "local"}
			oc.after[n] = "connected"
		}
		oc.set("/x", "x", "failed")
		oc.delay["x"] = 10 * time.Second // holds the only slot from 1 s to 11 s
		oc.set("/a", "a", "failed")      // finds no slot at 3.5 s: waits first
		oc.set("/c", "c", "failed")
		oc.delay["c"] = 60 * time.Second // a start that hangs
		e, err := New(cfg, oc, Options{Budget: NewBudget(cfg.MaxConcurrent), URL: "http://oc"})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		_ = e.Arm("/x", ArmedByFlag)
		time.Sleep(500 * time.Millisecond)
		_ = e.Arm("/a", ArmedByFlag)
		time.Sleep(10 * time.Second) // 10.5 s: /c's first check at 11.5 s, while /a's read runs
		_ = e.Arm("/c", ArmedByFlag)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		a := oc.connectTimes("/a", "a", start)
		c := oc.connectTimes("/c", "c", start)
		if len(a) == 0 || a[0] > 15*time.Second {
			t.Fatalf("/a, waiting for a slot since 3.5 s, connected at %v; /c, due at 11.5 s, connected at %v: the slot released at 11 s went to /c", a, c)
		}
	})
}

// The same across the OpenCode servers of one daemon: the budget is the
// daemon's, and so is the order of those waiting for it. A directory of
// server A that waited first for the only local slot gets the slot
// released by server B's connect, not a directory of B that came due
// after the release while A's fresh read was under way.
func TestSlotReleasedToAWaitingDirectoryOfAnotherServerIsNotTakenByALaterOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cfg := noJitter()
		cfg.MaxConcurrent = 1
		budget := NewBudget(cfg.MaxConcurrent)
		a := &slowReads{ocStub: newStub(), read: map[string]time.Duration{"/a": 2 * time.Second}}
		b := newStub()
		a.config["a"] = opencode.MCPEntry{Type: "local"}
		a.after["a"] = "connected"
		a.set("/a", "a", "failed")
		for _, n := range []string{"x", "c"} {
			b.config[n] = opencode.MCPEntry{Type: "local"}
			b.after[n] = "connected"
		}
		b.set("/x", "x", "failed")
		b.delay["x"] = 10 * time.Second // holds the daemon's only local slot from 1 s to 11 s
		b.set("/c", "c", "failed")
		b.delay["c"] = 60 * time.Second // a start that hangs
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
		_ = eb.Arm("/x", ArmedByFlag)
		time.Sleep(500 * time.Millisecond)
		_ = ea.Arm("/a", ArmedByFlag) // finds no slot at 3.5 s
		time.Sleep(10 * time.Second)
		_ = eb.Arm("/c", ArmedByFlag) // first check at 11.5 s, while /a's read runs
		time.Sleep(20 * time.Second)
		synctest.Wait()
		got := a.connectTimes("/a", "a", start)
		if len(got) == 0 || got[0] > 15*time.Second {
			t.Fatalf("server A's /a, waiting for a slot since 3.5 s, connected at %v; server B's /c connected at %v: the slot released at 11 s went to B's later directory",
				got, b.connectTimes("/c", "c", start))
		}
	})
}

// A directory disarmed while it waits in the line for a slot leaves the
// budget's line with it: another server's directory that waits behind it
// gets the next released slot, not its idle re-check.
func TestDirectoryDisarmedInTheSlotLineLeavesItToTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cfg := noJitter()
		cfg.MaxConcurrent = 1
		budget := NewBudget(cfg.MaxConcurrent)
		a, b := newStub(), newStub()
		a.config["a"] = opencode.MCPEntry{Type: "local"}
		a.after["a"] = "connected"
		a.set("/a", "a", "failed")
		for _, n := range []string{"x", "y"} {
			b.config[n] = opencode.MCPEntry{Type: "local"}
			b.after[n] = "connected"
		}
		b.set("/x", "x", "failed")
		b.delay["x"] = 10 * time.Second // holds the daemon's only local slot from 1 s to 11 s
		b.set("/y", "y", "failed")
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
		_ = eb.Arm("/x", ArmedByFlag)
		time.Sleep(500 * time.Millisecond)
		_ = ea.Arm("/a", ArmedByFlag) // waits for a slot from 1.5 s: server A heads the line
		time.Sleep(500 * time.Millisecond)
		_ = eb.Arm("/y", ArmedByFlag) // waits behind it from 2 s
		time.Sleep(3 * time.Second)
		ea.Disarm("/a", "test")
		time.Sleep(12 * time.Second)
		synctest.Wait()
		if got := b.connectTimes("/y", "y", start); len(got) == 0 || got[0] > 12*time.Second {
			t.Fatalf("/y, waiting behind a disarmed directory of another server, connected at %v; want at the release at 11 s", got)
		}
	})
}
