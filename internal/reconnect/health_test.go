package reconnect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
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

func (s *stuckOC) MCPStatus(context.Context, string) (map[string]opencode.ServerStatus, error) {
	<-s.release
	return nil, errors.New("released")
}

func (s *stuckOC) Connect(context.Context, string, string) error { return nil }

func (s *stuckOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	return map[string]opencode.MCPEntry{}, nil
}
