package reconnect

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

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
