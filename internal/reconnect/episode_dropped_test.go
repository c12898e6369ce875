package reconnect

import (
	"testing"
	"testing/synctest"
	"time"
)

// A server's episode is allocated when one begins and dropped when it is
// over: most servers are healthy and hold none. A connect that returns
// after the episode was forgotten meanwhile (here the user's reconnect,
// while the connect was in flight) makes a fresh one with no attempt in
// it (Returned); the reads that then show the server connected drop it
// (Spent), so a healthy server does not hold an episode for ever.
func TestAHealthyServerHoldsNoEpisodeAfterAReconnectDuringAConnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "failed")
		oc.delay["s"] = 5 * time.Second
		oc.after["s"] = "connected"
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		if err := e.Arm("/p", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the connect of s, sent at 1 s, is in flight
		if _, err := e.Reconnect("/p", []string{"s"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute) // connected, stable, read every idle interval
		synctest.Wait()
		e.mu.Lock()
		s := e.dirs["/p"].servers["s"]
		status, ep := s.status, s.ep
		e.mu.Unlock()
		if status != "connected" {
			t.Fatalf("status = %q, want connected", status)
		}
		if ep != nil {
			t.Fatalf("s, connected for ten minutes, still holds an episode (%d attempts, returned after the reconnect forgot it): want nil while healthy", ep.NumRequeues())
		}
	})
}
