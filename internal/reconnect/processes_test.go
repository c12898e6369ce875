package reconnect

import (
	"context"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A dead child is a crash, whatever status says (OpenCode before 1.15
// keeps a killed stdio server "connected" for good): the directory is
// read at once, and the server the read still shows connected is
// connected again. The local servers' commands come from the config.
func TestDeadChildOfAConnectedServerIsReconnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()
		gen, locals, changed := e.LocalServers(0)
		if !changed || len(locals) != 1 || locals[0].Directory != "/p" || locals[0].Name != "s" || len(locals[0].Command) != 2 || gen == 0 {
			t.Fatalf("local servers = %d %+v", gen, locals)
		}
		if _, again, changed := e.LocalServers(gen); changed || again != nil {
			t.Fatalf("local servers asked again unchanged: %v %+v", changed, again)
		}
		if n := len(oc.connectTimes("/p", "s", time.Time{})); n != 0 {
			t.Fatalf("%d connects of a healthy server", n)
		}
		exited := time.Now()
		e.ChildExited("/p", "s", birthAt(exited.Add(-time.Minute)), exited)
		time.Sleep(510 * time.Millisecond)
		synctest.Wait()
		got := oc.connectTimes("/p", "s", exited)
		if len(got) != 1 || got[0] != announceGrace {
			t.Fatalf("connects after the child exited = %v, want one after the %v grace", got, announceGrace)
		}
	})
}

// The evidence is charged to the server's episode: a child that dies again
// and again is reconnected on the backoff schedule (1, 2, 4, 8 s gaps),
// then in the slow tier; a thousand exit reports cost no more.
func TestDeadChildCrashLoopBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"crashy"}}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		start := time.Now()
		for range 60 * 20 { // the child "dies" 20 times a second for a minute
			e.ChildExited("/p", "s", birthAt(time.Now()), time.Now())
			time.Sleep(50 * time.Millisecond)
		}
		synctest.Wait()
		got := oc.connectTimes("/p", "s", start)
		want := secs(0.5, 1.5, 3.5, 7.5, 15.5) // the grace, then the backoff
		if len(got) != len(want) {
			t.Fatalf("connects in a minute of exits = %v, want %v", got, want)
		}
		for i := range want {
			if d := got[i] - want[i]; d < 0 || d > 100*time.Millisecond {
				t.Fatalf("connects in a minute of exits = %v, want %v", got, want)
			}
		}
		if n := oc.count("status", "/p"); n > 80 {
			t.Fatalf("%d status reads for 1200 exit reports", n)
		}
	})
}

// Never for a server the fresh read shows disabled or needing the user,
// whatever the process evidence; and not on a read sent before the exit.
func TestDeadChildNeverConnectsWhatTheReadSaysNotTo(t *testing.T) {
	for _, status := range []string{"disabled", "needs_auth", "needs_client_registration"} {
		t.Run(status, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				oc := newStub()
				oc.set("/p", "s", "connected")
				oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"x"}}
				e, err := New(noJitter(), oc, Options{})
				if err != nil {
					t.Fatal(err)
				}
				_ = e.Arm("/p", ArmedByFlag)
				stop := runEngine(e)
				defer stop()
				time.Sleep(90 * time.Second)
				synctest.Wait()
				oc.set("/p", "s", status) // the user disabled it; its process ended
				e.ChildExited("/p", "s", birthAt(time.Now()), time.Now())
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				if n := len(oc.connectTimes("/p", "s", time.Time{})); n != 0 {
					t.Fatalf("%d connects of a %s server", n, status)
				}
			})
		})
	}
}

// slowStub answers status reads after a delay.
type slowStub struct {
	*ocStub
	delay time.Duration
}

func (s *slowStub) MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error) {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.ocStub.MCPStatus(ctx, dir)
}

// A read sent before the exit was seen cannot confirm it: its "connected"
// may describe the dead child. Only a read sent after it decides.
func TestDeadChildNeedsAReadSentAfterTheExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &slowStub{ocStub: newStub(), delay: 2 * time.Second}
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"x"}}
		cfg := noJitter()
		cfg.IdleInterval = 10 * time.Second
		e, err := New(cfg, oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		// An idle read is under way (they come every 10 s and take 2 s);
		// the exit is seen in the middle of one.
		for e.Snapshot().Directories[0].NextCheck.After(time.Now()) {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second)
		exited := time.Now()
		e.ChildExited("/p", "s", birthAt(exited.Add(-time.Minute)), exited)
		time.Sleep(1100 * time.Millisecond) // the read in flight returns
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", exited); len(got) != 0 {
			t.Fatalf("connected at %v on a read sent before the exit", got)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", exited); len(got) != 1 {
			t.Fatalf("connects after a read sent after the exit = %v, want one", got)
		}
	})
}

// An exit OpenCode caused itself and announces (a disposal) is seen
// within the grace: the directory is forgotten, not read again (a read
// would re-create the disposed instance).
func TestDeadChildOfADisposedInstanceReadsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"x"}}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.updated", Directory: "/p"})
		time.Sleep(90 * time.Second)
		synctest.Wait()
		reads := oc.count("status", "/p")
		e.ChildExited("/p", "s", birthAt(time.Now().Add(-time.Minute)), time.Now()) // the disposal killed it
		time.Sleep(100 * time.Millisecond)
		e.HandleEvent(opencode.Event{Kind: opencode.KindInstanceGone, Type: "server.instance.disposed", Directory: "/p"})
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := oc.count("status", "/p"); n != reads {
			t.Fatalf("%d status reads of a disposed directory after its children died", n-reads)
		}
	})
}

// The child a connect of the engine starts can die before that connect
// returns (a server that crashes right after its handshake): its exit
// is news, not the exit of the child the connect replaced, and on a
// release that never reports it nothing else would tell. It is repaired
// at the episode's next attempt.
func TestDeadChildOfTheConnectInFlightIsRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		oc.delay["s"] = 400 * time.Millisecond
		oc.after["s"] = "connected" // OpenCode before 1.15: whatever its child does
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.SetProcessView(&tableView{})
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()
		crash := time.Now()
		e.ChildExited("/p", "s", birthAt(crash.Add(-80*time.Second)), crash)
		time.Sleep(announceGrace + 100*time.Millisecond) // the repair's connect is in flight
		if got := oc.connectTimes("/p", "s", crash); len(got) != 1 {
			t.Fatalf("setup: connects %v", got)
		}
		// The child it started (born after the connect began) dies
		// before the connect returns.
		e.ChildExited("/p", "s", birthAt(time.Now().Add(-50*time.Millisecond)), time.Now())
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", crash); len(got) != 2 || got[1] != announceGrace+time.Second {
			t.Fatalf("connects after the crash = %v, want the repair and, at the episode's next attempt (%v), the repair of the child it started", got, announceGrace+time.Second)
		}
	})
}

// Whose connect started a child does not matter: the exit of a child
// born after the engine's last connect (another client connected the
// server since) is a crash to repair; the exit of one born before that
// connect is the exit of a child it replaced.
func TestDeadChildStartedByAnotherClientIsRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		oc.after["s"] = "connected"
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.SetProcessView(&tableView{})
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		first := time.Now()
		e.ChildExited("/p", "s", birthAt(first.Add(-80*time.Second)), first) // repaired by the engine
		time.Sleep(90 * time.Second)
		synctest.Wait()
		if n := len(oc.connectTimes("/p", "s", first)); n != 1 {
			t.Fatalf("setup: %d connects", n)
		}
		// The child the engine's connect replaced ends late: no news.
		e.ChildExited("/p", "s", birthAt(first.Add(-80*time.Second)), time.Now())
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(oc.connectTimes("/p", "s", first)); n != 1 {
			t.Fatalf("the late exit of a replaced child caused %d connects", n-1)
		}
		// A TUI connected it since (a new child, born 30 s ago), which
		// crashes.
		e.ChildExited("/p", "s", birthAt(time.Now().Add(-30*time.Second)), time.Now())
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(oc.connectTimes("/p", "s", first)); n != 2 {
			t.Fatalf("the crash of a child another client started: %d connects, want 1", n-1)
		}
	})
}

// The child a connect of the engine starts can die before that connect
// returns, and on a release that never reports it (OpenCode before 1.15
// keeps saying connected) the exit is the only news. A read taken while
// that connect is still in flight (a stdio server that takes three
// seconds to start: npx, uvx) must not use up the evidence: the exit is
// repaired after the connect returns.
func TestDeadChildOfASlowConnectInFlightIsRepairedAfterItReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"npx", "some-server"}}
		oc.delay["s"] = 3 * time.Second
		oc.after["s"] = "connected" // OpenCode before 1.15: whatever its child does
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.SetProcessView(&tableView{})
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()
		crash := time.Now()
		e.ChildExited("/p", "s", birthAt(crash.Add(-80*time.Second)), crash)
		time.Sleep(announceGrace + 100*time.Millisecond) // the repair's connect is in flight
		if got := connectsSince(oc, "/p", "s", crash); len(got) != 1 {
			t.Fatalf("setup: connects %v", got)
		}
		// The child it started dies while the connect is still in flight.
		e.ChildExited("/p", "s", birthAt(time.Now().Add(-50*time.Millisecond)), time.Now())
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := connectsSince(oc, "/p", "s", crash); len(got) < 2 {
			t.Fatalf("connects after the crash = %v, status reads %d: the child the repair started died before the repair returned, and was never repaired",
				got, oc.count("status", "/p"))
		}
	})
}

// (A dead child is a crash; rule 4/5: one crash, one
// attempt). On 1.18.34 a crashed stdio server shows failed and OpenCode
// publishes mcp.tools.changed: the engine connects it at once and OpenCode
// spawns a new, working child. The process view scans every 2 s, so it
// usually sees the OLD child gone only after that connect returned, and
// reports ChildExited for the same crash. The engine cannot tell the
// report is about a child its own connect already replaced: the next read
// shows connected, readStart is after deadAt, and deadChild connects
// again, killing the new, healthy child (whose exit the view reports in
// turn: a self-feeding loop on the backoff schedule).
func TestDeadChildReportOfAnAlreadyRepairedCrashIsNoNews(t *testing.T) {
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
		e.SetProcessView(&tableView{}) // the clock births count in
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()

		crash := time.Now()
		oc.set("/p", "s", "failed") // 1.18.34: the child died
		e.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"})
		time.Sleep(time.Second) // the connect (0.4 s) returned; OpenCode spawned a new child
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", crash); len(got) != 1 {
			t.Fatalf("connects after the crash = %v, want one", got)
		}
		// The view's next scan sees the crashed child gone.
		e.ChildExited("/p", "s", birthAt(crash.Add(-80*time.Second)), time.Now()) // the crashed child, started long before
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", crash); len(got) != 1 {
			t.Fatalf("connects for one crash = %v, want one: the late exit report of the replaced child killed the new one", got)
		}
	})
}

// tableView is a process table as the engine's ProcessView sees it: the
// birth of the process serving each server now, on a clock of ticks of
// the (fake) wall clock (birthAt).
type tableView struct {
	mu      sync.Mutex
	serving map[[2]string]uint64
	asked   int
}

// birthAt is the birth of a process started at t, on tableView's clock.
func birthAt(t time.Time) uint64 { return uint64(t.UnixMilli() / 10) }

func (v *tableView) set(dir, name string, started time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.serving == nil {
		v.serving = map[[2]string]uint64{}
	}
	v.serving[[2]string{dir, name}] = birthAt(started)
}

func (v *tableView) Look() {}

func (v *tableView) Clock() uint64 { return birthAt(time.Now()) }

func (v *tableView) Successor(dir, name string, birth uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked++
	b, ok := v.serving[[2]string{dir, name}]
	return ok && b > birth
}

// A server OpenCode started again by itself (a config reload, another
// client's connect) is not connected once more: the decision asks the
// process table as it is when the check reads status, so a successor
// that the view's next scan (seconds later) would report is seen already.
func TestSuccessorSeenAtDecisionTimeIsNotReconnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		view := &tableView{}
		e.SetProcessView(view)
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()
		first := time.Now().Add(-time.Minute)
		exited := time.Now()
		// The old child is gone; OpenCode has started its successor
		// already, which only a later scan would report.
		view.set("/p", "s", exited.Add(5*time.Millisecond))
		e.ChildExited("/p", "s", birthAt(first), exited)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", exited); len(got) != 0 {
			t.Fatalf("a server OpenCode had already started again (status connected, its successor in the process table) was connected again at %v", got)
		}
		if view.asked == 0 {
			t.Fatal("the process table was never asked")
		}
	})
}

// Without a successor the dead child is repaired, as before: the
// process view's answer is what decides.
func TestDeadChildWithoutASuccessorIsReconnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		view := &tableView{}
		view.set("/p", "s", time.Now()) // the first child, which then exits
		e.SetProcessView(view)
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		exited := time.Now()
		e.ChildExited("/p", "s", birthAt(exited.Add(-80*time.Second)), exited)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", exited); len(got) != 1 || got[0] != announceGrace {
			t.Fatalf("connects after a dead child with no successor = %v, want one after %v", got, announceGrace)
		}
	})
}

// The grace after a child's exit (announceGrace) waits for OpenCode's
// word, and only for it: on 1.18.34 a killed stdio server is failed and
// announced (mcp.tools.changed) about 0.1 s after the kill, which the
// exit watcher saw within milliseconds; OpenCode 2 announces a change
// (mcp.status.changed). Once OpenCode has spoken, the directory is read
// and the server connected at once, not when the grace is over; a crash
// loop is checked at its episode's time, also without the grace.
func TestSpokenCrashDoesNotWaitForTheGrace(t *testing.T) {
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
				oc.after["s"] = "connected"
				e, err := New(noJitter(), oc, Options{})
				if err != nil {
					t.Fatal(err)
				}
				e.SetProcessView(&tableView{})
				_ = e.Arm("/p", ArmedByFlag)
				stop := runEngine(e)
				defer stop()
				time.Sleep(90 * time.Second) // connected and stable
				synctest.Wait()

				// A first crash: the exit is seen at once, OpenCode speaks
				// 100 ms later.
				crash := time.Now()
				e.ChildExited("/p", "s", birthAt(crash.Add(-80*time.Second)), crash)
				time.Sleep(100 * time.Millisecond)
				oc.set("/p", "s", "failed")
				e.HandleEvent(c.ev)
				time.Sleep(time.Second)
				synctest.Wait()
				if got := oc.connectTimes("/p", "s", crash); len(got) != 1 || got[0] != 100*time.Millisecond {
					t.Fatalf("first crash: connects %v after the exit, want one at 100ms, when OpenCode spoke (not after the %v grace)", got, announceGrace)
				}

				// A second crash 5 s later (a crash loop): its episode's
				// next attempt is due 1 s after the first (past by then),
				// so it too is connected when OpenCode speaks.
				time.Sleep(4 * time.Second)
				again := time.Now()
				e.ChildExited("/p", "s", birthAt(crash.Add(200*time.Millisecond)), again)
				time.Sleep(100 * time.Millisecond)
				oc.set("/p", "s", "failed")
				e.HandleEvent(c.ev)
				time.Sleep(3 * time.Second)
				synctest.Wait()
				if got := oc.connectTimes("/p", "s", again)[1:]; len(got) != 1 || got[0] != 100*time.Millisecond {
					t.Fatalf("crash loop: connects %v after the exit, want one at 100ms", got)
				}
			})
		})
	}
}
