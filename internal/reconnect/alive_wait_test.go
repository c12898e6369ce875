package reconnect

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

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

func (o *slowOC) MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error) {
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
