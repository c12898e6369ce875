package reconnect

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// takeSlot runs with Engine.mu held. When a connect releases a slot just
// as takeSlot calls Budget.Wait, a Wait that ran the grant synchronously,
// on the caller's goroutine, would run Engine.granted, which locks
// Engine.mu again: the engine would deadlock for good (every directory's
// loop, HandleEvent, Snapshot and so GET /status). The window is a few
// instructions wide, so this test hammers it; each round is one check that
// found the budget full while another directory's connect returned.
func TestTakeSlotRacingReleaseDoesNotDeadlock(t *testing.T) {
	e, err := New(DefaultConfig, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for round := 0; time.Now().Before(deadline); round++ {
		b := NewBudget(1).Share()
		e.budget = b
		if !tryAcquire(b, false) { // a connect of another directory holds the only slot
			t.Fatal("fresh budget full")
		}
		_, cancel := context.WithCancel(context.Background())
		d := newDir("/p", "test", time.Now(), cancel)
		var start sync.WaitGroup
		start.Add(1)
		took := make(chan struct{})
		go func() {
			start.Wait()
			e.mu.Lock()
			e.takeSlot(d, false)
			e.mu.Unlock()
			close(took)
		}()
		go func() {
			start.Wait()
			runtime.Gosched()
			b.Release(false) // that connect returned
		}()
		start.Done()
		select {
		case <-took:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: takeSlot never returned: Budget.Wait ran the grant under Engine.mu and Engine.granted blocked on it (engine deadlocked)", round)
		}
		cancel()
	}
}
