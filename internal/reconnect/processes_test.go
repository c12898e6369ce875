package reconnect

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
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

func (s *slowStub) MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error) {
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
