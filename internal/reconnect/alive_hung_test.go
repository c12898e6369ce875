package reconnect

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

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
