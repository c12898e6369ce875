package reconnect

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// slowReads is an ocStub whose status reads of some directories take a
// while (a busy OpenCode instance): the time between a directory's wake
// and its decision.
type slowReads struct {
	*ocStub
	mu   sync.Mutex
	read map[string]time.Duration // status read duration by directory
}

func (o *slowReads) MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error) {
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
