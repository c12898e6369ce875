package netwatch

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A burst of changes is one notification, at most a second after it began.
func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		changes := make(chan struct{}, 1)
		var fired atomic.Int64
		var at []time.Duration
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		t.Cleanup(func() { cancel(); <-done })
		go func() {
			defer close(done)
			Debounce(ctx, changes, 200*time.Millisecond, time.Second, func() {
				fired.Add(1)
				at = append(at, time.Since(start))
			})
		}()
		// A burst of 20 changes 50 ms apart (a VPN coming up).
		for range 20 {
			notify(changes)
			time.Sleep(50 * time.Millisecond)
		}
		synctest.Wait()
		if n := fired.Load(); n != 1 {
			t.Fatalf("notifications during a 1 s burst = %d, want 1 (at most 1 s after it began)", n)
		}
		if at[0] > time.Second {
			t.Fatalf("first notification at %v, want ≤ 1 s", at[0])
		}
		time.Sleep(2 * time.Second)
		notify(changes) // one lone change: 200 ms later
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		if n := fired.Load(); n != 2 {
			t.Fatalf("notifications = %d, want 2 (the burst, then the lone change)", n)
		}
		if d := at[1] - 3*time.Second; d < 150*time.Millisecond || d > 250*time.Millisecond {
			t.Fatalf("a lone change was notified %v after it, want about 200 ms", d)
		}
	})
}

func TestSnapshotSeesInterfaces(t *testing.T) {
	if s := snapshot(); s == "" {
		t.Fatal("no interfaces at all, not even loopback")
	}
}
