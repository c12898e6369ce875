package reconnect

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

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
