package reconnect

import (
	"context"
	"errors"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// An engine that runs and turns its loops is alive, and stays so through
// idle checks.
func TestAliveWhileRunning(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"docs": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm("/p", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		for _, at := range []time.Duration{0, 2 * time.Second, 5 * time.Minute, 20 * time.Minute} {
			r.at(at)
			if err := r.eng.Alive(time.Second); err != nil {
				t.Fatalf("at %v: %v", at, err)
			}
		}
	})
}

// Before Run the engine is starting: not stuck (the daemon serves its
// status API before it has found OpenCode, which may take long, and a
// restart would only start again). After Run it is stopped: it never
// checks again, and only a restart brings it back, so it is stuck.
// /healthz and the watchdog both decide by Stuck.
func TestAliveNeedsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := New(noJitter(), &stuckOC{}, Options{URL: "http://127.0.0.1:4096"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Alive(time.Second); !errors.Is(err, ErrNotStarted) || Stuck(err) {
			t.Fatalf("before Run: %v (stuck %v), want ErrNotStarted, not stuck", err, Stuck(err))
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = e.Run(ctx)
		}()
		synctest.Wait()
		if err := e.Alive(time.Second); err != nil {
			t.Fatalf("running: %v", err)
		}
		cancel()
		<-done
		if err := e.Alive(time.Second); !errors.Is(err, ErrStopped) || !Stuck(err) {
			t.Fatalf("after Run: %v (stuck %v), want ErrStopped, stuck", err, Stuck(err))
		}
		if Stuck(nil) {
			t.Fatal("an engine alive is stuck")
		}
	})
}

// A lock that is never released (a loop stuck holding it) makes Alive
// answer within its timeout, not hang with the engine.
func TestAliveLockHeldForEver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, g1().new(map[string]Spec{"docs": {Status: "connected"}}), noJitter(), nil)
		r.eng.mu.Lock()
		start := time.Now()
		err := r.eng.Alive(3 * time.Second)
		took := time.Since(start)
		r.eng.mu.Unlock()
		if err == nil || !strings.Contains(err.Error(), "stuck") {
			t.Fatalf("Alive with the lock held: %v, want stuck", err)
		}
		if took != 3*time.Second {
			t.Fatalf("Alive took %v, want its timeout of 3s", took)
		}
		if err := r.eng.Alive(time.Second); err != nil {
			t.Fatalf("lock released: %v", err)
		}
	})
}

// A directory whose loop stopped turning (a check in a call that never
// returns, whatever its context says) makes the engine stuck once that
// call is StuckAfter old, past every client timeout (when a check it was
// asked for is as far past due); before that it is alive.
func TestAliveStuckCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &stuckOC{release: make(chan struct{})}
		e, err := New(noJitter(), oc, Options{URL: "http://127.0.0.1:4096"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = e.Run(ctx)
		}()
		defer func() {
			close(oc.release)
			cancel()
			<-done
		}()
		if err := e.Arm("/p/stuck", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the first check starts, and hangs
		synctest.Wait()
		if _, err := e.Reconnect("/p/stuck", nil); err != nil { // due now, never run
			t.Fatal(err)
		}
		if err := e.Alive(time.Second); err != nil {
			t.Fatalf("a check just due: %v", err)
		}
		time.Sleep(StuckAfter - time.Second)
		if err := e.Alive(time.Second); err != nil {
			t.Fatalf("a check %v past due: %v", StuckAfter-time.Second, err)
		}
		time.Sleep(2 * time.Second)
		err = e.Alive(time.Second)
		if err == nil || !strings.Contains(err.Error(), "/p/stuck") || !strings.Contains(err.Error(), "stuck") {
			t.Fatalf("a check over %v past due: %v, want stuck naming the directory", StuckAfter, err)
		}
	})
}

func g1() generation { return generations[0] }

// stuckOC is an OpenCode whose status read never returns until released,
// whatever its context says: a loop stuck in a call.
type stuckOC struct{ release chan struct{} }

func (s *stuckOC) MCPStatus(context.Context, string) (map[string]opencode.MCPServerStatus, error) {
	<-s.release
	return nil, errors.New("released")
}

func (s *stuckOC) Connect(context.Context, string, string) error { return nil }

func (s *stuckOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	return map[string]opencode.MCPEntry{}, nil
}

// A fake NOTIFY_SOCKET sees no ping once the engine's loop is stuck:
// the watchdog exists to restart a hung daemon. Alive counts a
// directory as stuck only when its d.next is
// StuckAfter past due, but a check clears d.next when it starts and only a
// wake sets it again: a check that never returns (a config file that is a
// FIFO, a call that ignores its context) in a directory nobody wakes
// leaves d.next zero, and the engine is reported alive for ever. Here one
// --directory directory's first check hangs; an hour later (120 idle
// intervals without a check) Alive still says nil, so /healthz is 200 and
// the systemd watchdog keeps being pinged. TestAliveStuckCheck passes only
// because it calls Reconnect to make the hung directory due.
func TestHungCheckWithoutWakeIsNoticed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &stuckOC{release: make(chan struct{})}
		e, err := New(noJitter(), oc, Options{URL: "http://127.0.0.1:4096"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = e.Run(ctx)
		}()
		defer func() {
			close(oc.release)
			cancel()
			<-done
		}()
		if err := e.Arm("/p/stuck", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the first check starts, and hangs
		synctest.Wait()
		time.Sleep(time.Hour)
		if err := e.Alive(time.Second); err == nil {
			t.Fatalf("the only directory's check has hung for an hour (its idle re-check %v overdue by %v), and Alive still says the engine is alive",
				DefaultConfig.IdleInterval, time.Hour-DefaultConfig.IdleInterval)
		}
	})
}

// A directory waiting for a check slot is queued, whatever the slots are
// doing, and Alive does not judge it: at the instant a check ends and
// gives its slot back (one slot free, for a moment, before it is handed
// on), the directories still waiting are not checks past due. With 320
// directories and a slow OpenCode (10 s a read, the config and the
// status: 20 s a round of 32) the last rounds wait over two minutes, as
// TestChecksWaitingForACheckSlotAreNotStuck says they may; asked at the
// instant a round ends, Alive must not answer "stuck" (the watchdog would
// restart a daemon that only waits for OpenCode). Five bubbles make the
// instant near certain to be hit.
func TestAliveAtTheInstantACheckSlotIsFreed(t *testing.T) {
	var stuck error
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			e, oc := slowEngine(t)
			start := time.Now()
			armConnected(t, e, oc, 10*maxChecks)
			for k := 6; k < 10 && stuck == nil; k++ {
				// The instant the k-th round of checks ends.
				time.Sleep(time.Until(start.Add(time.Second + time.Duration(k)*20*time.Second)))
				for range 200 {
					if err := e.Alive(time.Second); err != nil {
						stuck = fmt.Errorf("at %v: %w", time.Since(start), err)
						break
					}
				}
			}
		})
		if stuck != nil {
			t.Fatal(stuck)
		}
	}
}

// tardyLister answers the booted locations after a delay shorter than any
// client timeout: a loaded OpenCode.
type tardyLister struct {
	*listingStub
	delay time.Duration
}

func (l *tardyLister) BootedLocations(ctx context.Context) ([]string, bool, error) {
	l.mu.Lock()
	l.lists++
	snap := slices.Clone(l.booted)
	l.mu.Unlock()
	t := time.NewTimer(l.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	return snap, true, nil
}

// Many checks due at once that all wait for one slow list of booted
// locations (each request answered after 10 s, well within the client's
// timeout) are waiting for OpenCode, not stuck: they share the request
// under way (its answer is as new as each needs), so they all read
// within one answer, and Alive (/healthz, the watchdog) says alive all
// along. Before, each waiter in line found the answer before it stale
// (older than the list's one second) and sent its own, one at a time:
// the sixtieth would have waited ten minutes, counted stuck after two.
// (This test never ended then: the line was a sync.Mutex, which a
// synctest bubble cannot wait out.)
func TestChecksWaitingForOneSlowListAreNotStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &tardyLister{listingStub: &listingStub{ocStub: newStub()}, delay: 10 * time.Second}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		const n = 60
		for i := range n {
			d := fmt.Sprintf("/p/%02d", i)
			oc.set(d, "s", "connected")
			oc.mu.Lock()
			oc.booted = append(oc.booted, d)
			oc.mu.Unlock()
			e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: d})
		}
		for range 60 { // ten minutes, looked at every ten seconds
			time.Sleep(10 * time.Second)
			if err := e.Alive(time.Second); err != nil {
				t.Fatalf("%v", err)
			}
		}
		synctest.Wait()
		if got := oc.count("status", ""); got < n {
			t.Fatalf("%d of %d directories read in ten minutes", got, n)
		}
	})
}

// slowOC answers every call after a delay.
type slowOC struct {
	*listingStub
	delay time.Duration
}

func (o *slowOC) pause(ctx context.Context) {
	t := time.NewTimer(o.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (o *slowOC) BootedLocations(ctx context.Context) ([]string, bool, error) {
	o.pause(ctx)
	return o.listingStub.BootedLocations(ctx)
}

func (o *slowOC) MCPConfig(ctx context.Context, dir string) (map[string]opencode.MCPEntry, error) {
	o.pause(ctx)
	return o.listingStub.MCPConfig(ctx, dir)
}

func (o *slowOC) MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error) {
	o.pause(ctx)
	return o.listingStub.MCPStatus(ctx, dir)
}

// A check that waits for one slow answer after another (the booted list,
// the config, the status: 50 s each here, to show the rule, where today's
// client timeouts keep each under 15 s) is waiting for OpenCode, not a
// loop that stopped turning: Alive says alive all along, and the check
// ends. Before, Alive measured the whole check and said stuck once it had
// run two minutes.
func TestSlowAnswersAreNotAStuckLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &slowOC{listingStub: &listingStub{ocStub: newStub()}, delay: 50 * time.Second}
		oc.set("/p", "s", "connected")
		oc.booted = []string{"/p"}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/p"})
		for range 18 { // three minutes
			time.Sleep(10 * time.Second)
			if err := e.Alive(time.Second); err != nil {
				t.Fatalf("%v", err)
			}
		}
		if oc.count("status", "/p") != 1 {
			t.Fatalf("the slow check did not read /p")
		}
	})
}

// A check waiting for one of the engine's maxChecks slots is waiting for
// OpenCode as surely as one queued in the client for a connection: every
// check ahead of it is waiting for an answer that comes within its
// call's timeout (10 s here, under the client's 15 s). Alive must not
// call the engine stuck then. With 320 directories named together and
// each of the config and status reads taking 10 s, the checks run 32 at
// a time, 20 s a round: the last ones wait over three minutes for a
// slot, with checking set and no call awaiting, so Alive reports "the
// check of … has run for 2m since OpenCode last answered it" and the
// watchdog would restart a daemon that only waited for a slow OpenCode.
func TestChecksWaitingForACheckSlotAreNotStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, oc := slowEngine(t)
		armConnected(t, e, oc, 10*maxChecks)
		for range 30 { // five minutes, looked at every ten seconds
			time.Sleep(10 * time.Second)
			if err := e.Alive(time.Second); err != nil {
				t.Fatalf("%v", err)
			}
		}
	})
}

// slowEngine runs, until the test ends, an engine whose OpenCode answers
// every call 10 s late (a read takes as long as a slow OpenCode's
// timeout allows). Call it in a synctest bubble.
func slowEngine(t *testing.T) (*Engine, *slowOC) {
	t.Helper()
	oc := &slowOC{listingStub: &listingStub{ocStub: newStub()}, delay: 10 * time.Second}
	e, err := New(noJitter(), oc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runEngine(e))
	synctest.Wait()
	return e, oc
}

// armConnected arms n directories, /p/000 on, each with one connected
// server s, and returns their paths.
func armConnected(t *testing.T, e *Engine, oc *slowOC, n int) []string {
	t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("/p/%03d", i)
		oc.set(dirs[i], "s", "connected")
		if err := e.Arm(dirs[i], ArmedByFlag); err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// OpenCode 2's degrade rules (the v2 facts, section 4): a start stuck in
// pending, a status this daemon does not know.

// A server pending past OpenCode 2's startup and catalog timeouts plus
// 10 s is reported stuck, once: a log line, a needs_user event and a hint
// in status. It is never connected (a start is running).
func TestPendingPastItsTimeoutsIsReportedStuck(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"p": {}})
		fake.SetPending(24 * time.Hour)
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(60 * time.Second)
		if n := len(r.eventsOf(EventNeedsUserInput)); n != 0 {
			t.Fatalf("stuck reported after 59 s of pending: %+v", r.eventsOf(EventNeedsUserInput))
		}
		r.at(10 * time.Minute)
		evs := r.eventsOf(EventNeedsUserInput)
		if len(evs) != 1 || evs[0].Server != "p" || !strings.Contains(evs[0].Reason, "stuck") {
			t.Fatalf("needs_user events = %+v, want one saying p's start looks stuck", evs)
		}
		if s := r.server(dirA, "p"); s.Status != "pending" || !strings.Contains(s.Hint, "stuck") {
			t.Fatalf("snapshot = %+v, want a stuck hint", s)
		}
		if n := fake.Count(routeConnect, "", ""); n != 0 {
			t.Fatalf("%d connects of a pending server", n)
		}
	})
}

// A status the daemon does not know (one 2.x revision had
// "disconnected") is left alone and logged once, however often it is read.
func TestUnknownStatusIsLeftAloneAndLoggedOnce(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"odd": {Status: "disconnected"}})
		logs := &lineLog{}
		r := newRigWith(t, fake, noJitter(), Options{Log: slog.New(logs)})
		_ = r.eng.Arm(dirA, "test")
		r.at(10 * time.Minute)
		if n := fake.Count(routeConnect, "", ""); n != 0 {
			t.Fatalf("%d connects of a server in an unknown status", n)
		}
		if n := logs.count("does not know"); n != 1 {
			t.Fatalf("unknown status logged %d times in 10 minutes, want once", n)
		}
	})
}

// lineLog is a slog handler that keeps each message with its attributes.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (h *lineLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	h.lines = append(h.lines, line)
	return nil
}
func (h *lineLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineLog) WithGroup(string) slog.Handler      { return h }

func (h *lineLog) count(s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}
