package reconnect

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// slowLister takes its snapshot of the booted locations when the request
// arrives and answers 500 ms later, as a loaded server does.
type slowLister struct{ *listingStub }

func (l *slowLister) BootedLocations(ctx context.Context) ([]string, bool, error) {
	l.mu.Lock()
	l.lists++
	snap := slices.Clone(l.booted)
	l.mu.Unlock()
	t := time.NewTimer(500 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	return snap, true, nil
}

// (Disposal without location.shutdown; the booted-locations cache.)
// The shared list is stamped with the time its
// answer came back, not the time its request was sent. A list whose
// request predates a directory's boot (and the event that armed it), but
// whose answer came after that event, counts as fresh for it: the
// directory, booted and in use (a session was just created there), is
// judged "no longer booted" and forgotten; nothing watches its MCP
// servers until the next activity event.
func TestBootedListSentBeforeAnEventIsNotFreshForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &slowLister{&listingStub{ocStub: newStub()}}
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
		oc.booted = []string{"/a"}
		oc.mu.Unlock()
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/a"})
		time.Sleep(time.Second) // /a's first check: its list request is sent now, answered at +0.5 s
		time.Sleep(200 * time.Millisecond)
		// Meanwhile a TUI opens /b: its location boots, its session is announced.
		oc.mu.Lock()
		oc.booted = append(oc.booted, "/b")
		oc.mu.Unlock()
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/b"})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := oc.count("status", "/b"); n == 0 {
			var armed []string
			for _, d := range e.Snapshot().Directories {
				armed = append(armed, d.Directory)
			}
			t.Fatalf("/b, booted and in use, was never read (armed now: %v): a list requested before its boot was taken as fresh for it", armed)
		}
	})
}
