package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// Disposal without location.shutdown (a check woken
// by an event first confirms its location is still booted) and rule 8
// (no call for a disposed directory until it is armed again). The list of
// booted locations is shared for a second (bootedCache), and a list older
// than the directory's last event is re-asked only when it does NOT name
// the directory: a list fetched just before a disposal, by another
// directory's check, still names it. On the preview build a disposal is
// announced only by mcp.status.changed for the location's servers; for a
// server last seen connected and stable that is a first crash, checked at
// once, and the check believes the stale list and reads the location,
// booting it (and every MCP server it configures) again: the disposal is
// undone, as the real build showed before this change.
func TestStaleBootedListDoesNotUndoADisposal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		oc := &listingStub{ocStub: newStub()}
		oc.set("/a", "s", "connected")
		oc.set("/b", "s", "connected")
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		oc.mu.Lock()
		oc.booted = []string{"/a", "/b"} // sessions there: both locations run
		oc.mu.Unlock()
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/a"}) // checks at 1 s, 31 s, …
		time.Sleep(10 * time.Second)
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/b"}) // checks at 11 s, 41 s, …
		// /b's idle check at 41 s fetches the list: /a and /b booted.
		time.Sleep(start.Add(41*time.Second + 300*time.Millisecond).Sub(time.Now()))
		synctest.Wait()
		reads := oc.count("status", "/a")
		if reads == 0 || !oc.isBooted("/a") {
			t.Fatalf("setup: /a read %d times, booted %v", reads, oc.isBooted("/a"))
		}
		// 0.3 s later someone disposes /a (DELETE /api/debug/location);
		// the preview announces it only by its servers' status changes.
		oc.dispose("/a")
		e.HandleEvent(opencode.Event{Kind: opencode.KindServerChanged, Type: "mcp.status.changed", Directory: "/a", Server: "s"})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := oc.count("status", "/a"); n != reads || oc.isBooted("/a") {
			t.Fatalf("after /a was disposed: %d more status reads of /a, booted again %v: the check trusted a list of booted locations fetched 0.3 s before the disposal",
				n-reads, oc.isBooted("/a"))
		}
	})
}
