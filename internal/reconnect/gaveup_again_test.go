package reconnect

import (
	"testing"
	"time"
)

// Rule 11 says the daemon logs (and publishes gave_up) when it
// gives up on a server. A server that reached the slow tier, was retried
// by the user's `reconnect` (a fresh episode), and failed its whole fast
// episode again is announced as given up a second time: a gave_up event,
// a log line, the give-up metric. (The crash report's first-crash shortcut
// starts a fresh episode the same way.)
func TestGaveUpAnnouncedAgainAfterReconnect(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"broken": {Status: "failed", Error: "Connection closed"}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		r.at(20 * time.Second) // attempts at 1, 2, 4, 8, 16 s: slow tier
		if n := len(r.eventsOf(EventGaveUp)); n != 1 {
			t.Fatalf("gave_up events after the first episode = %d, want 1", n)
		}
		if _, err := r.eng.Reconnect(dirA, nil); err != nil {
			t.Fatal(err)
		}
		r.at(60 * time.Second) // a fresh fast episode of five attempts, all failed
		if got := len(r.connectTimes(dirA, "broken")); got < 10 {
			t.Fatalf("connects = %d, want the second fast episode too", got)
		}
		if n := len(r.eventsOf(EventGaveUp)); n != 2 {
			t.Errorf("gave_up events = %d after a reconnect's fresh episode failed again, want 2", n)
		}
	})
}
