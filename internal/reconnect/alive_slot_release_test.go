package reconnect

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// Since 840add8 a directory due for a check waits in the scheduler's heap
// for a check slot with nothing set on it, and Alive excuses it only while
// every slot is taken (checksFull). A check that ends gives its slot back
// before the scheduler, kicked, hands it to the heap: at that instant one
// slot is free, and every directory still waiting in the heap reads as a
// check past due. With 320 directories and a slow OpenCode (10 s a read,
// the config and the status: 20 s a round of 32) the last rounds wait
// over two minutes, as TestChecksWaitingForACheckSlotAreNotStuck says
// they may; asked at the instant a round ends, Alive answers "stuck",
// and the watchdog would restart a daemon that only waits for OpenCode.
// (A directory queued in check, as before 840add8, carried d.queued and
// was excused whatever the slots: 0 of 20 runs failed then; 16 of 20
// failed with one bubble per run now. Five bubbles make it near certain.)
func TestAliveAtTheInstantACheckSlotIsFreed(t *testing.T) {
	var stuck error
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			oc := &slowOC{listingStub: &listingStub{ocStub: newStub()}, delay: 10 * time.Second}
			e, err := New(noJitter(), oc, Options{})
			if err != nil {
				t.Fatal(err)
			}
			stop := runEngine(e)
			defer stop()
			synctest.Wait()
			start := time.Now()
			const n = 10 * maxChecks
			for i := range n {
				d := fmt.Sprintf("/p/%03d", i)
				oc.set(d, "s", "connected")
				if err := e.Arm(d, ArmedByFlag); err != nil {
					t.Fatal(err)
				}
			}
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
