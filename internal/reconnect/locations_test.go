package reconnect

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// listingStub is an OpenCode 2 that lists its booted locations (the
// preview's GET /api/debug/location) and announces no disposal.
type listingStub struct {
	*ocStub
	mu      sync.Mutex
	booted  []string
	lists   int
	listErr error
}

func (l *listingStub) BootedLocations(context.Context) ([]string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lists++
	if l.listErr != nil {
		return nil, false, l.listErr
	}
	return slices.Clone(l.booted), true, nil
}

func (l *listingStub) MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error) {
	l.mu.Lock()
	if !slices.Contains(l.booted, dir) {
		l.booted = append(l.booted, dir) // reading boots it
	}
	l.mu.Unlock()
	return l.ocStub.MCPStatus(ctx, dir)
}

func (l *listingStub) dispose(dir string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.booted = slices.DeleteFunc(l.booted, func(d string) bool { return d == dir })
}

func (l *listingStub) isBooted(dir string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.booted, dir)
}

// A location disposed behind the daemon's back (no location.shutdown on
// this build) is not booted again by the check its own status changes
// wake: the check asks first, finds it gone and forgets the directory;
// the status changes after it arm nothing, a session does.
func TestDisposedLocationIsNotBootedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &listingStub{ocStub: newStub()}
		oc.set("/p", "s", "connected")
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		oc.booted = []string{"/p"} // a session there: its location runs
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/p"})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if !oc.isBooted("/p") || oc.count("status", "/p") != 1 {
			t.Fatalf("setup: /p booted %v, read %d times", oc.isBooted("/p"), oc.count("status", "/p"))
		}
		oc.dispose("/p") // DELETE /api/debug/location by someone else
		for range 3 {    // the disposal's own mcp.status.changed
			e.HandleEvent(opencode.Event{Kind: opencode.KindServerChanged, Type: "mcp.status.changed", Directory: "/p", Server: "s"})
		}
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if oc.isBooted("/p") || oc.count("status", "/p") != 1 {
			t.Fatalf("after the disposal: /p booted %v, read %d times: the daemon undid the disposal", oc.isBooted("/p"), oc.count("status", "/p"))
		}
		if n := len(e.Snapshot().Directories); n != 0 {
			t.Fatalf("armed after the disposal: %+v", e.Snapshot().Directories)
		}
		oc.mu.Lock()
		oc.booted = []string{"/p"}
		oc.mu.Unlock()
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/p"})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if oc.count("status", "/p") != 2 {
			t.Fatalf("a session in /p did not arm it again (%d reads)", oc.count("status", "/p"))
		}
	})
}

// A directory the user named is theirs: it is read (and booted) whether
// or not OpenCode has it booted.
func TestNamedDirectoryIsReadWhenNotBooted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &listingStub{ocStub: newStub()}
		oc.set("/named", "s", "connected")
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/named", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if oc.count("status", "/named") != 1 {
			t.Fatalf("--directory /named read %d times, want 1", oc.count("status", "/named"))
		}
		if oc.lists != 0 {
			t.Fatalf("asked for the booted locations %d times for a named directory", oc.lists)
		}
	})
}

// The checks of a thousand directories due in the same second share one
// request for the booted locations; a list that cannot be read is no
// permission: the checks wait (no read that could boot a disposed
// location), sharing each failure for its second and asking again with
// backoff, and read again once the list answers.
func TestBootedLocationsAreAskedOncePerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &listingStub{ocStub: newStub()}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		for i := range 1000 {
			d := "/p/" + string(rune('a'+i%26)) + "/" + time.Duration(i).String()
			oc.set(d, "s", "connected")
			oc.booted = append(oc.booted, d)
			e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: d})
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := oc.count("status", ""); n != 1000 {
			t.Fatalf("status reads = %d, want 1000", n)
		}
		if oc.lists > 2 {
			t.Fatalf("booted locations asked %d times for 1000 checks in one second", oc.lists)
		}
		oc.mu.Lock()
		oc.listErr = errors.New("opencode unavailable")
		lists := oc.lists
		oc.mu.Unlock()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := oc.count("status", ""); n != 1000 {
			t.Fatalf("status reads with an unreadable list = %d, want none after the first 1000", n-1000)
		}
		oc.mu.Lock()
		lists = oc.lists - lists
		oc.listErr = nil
		oc.mu.Unlock()
		if lists > 2*120 {
			t.Fatalf("the booted locations asked %d times in 2 minutes of failures, want a shared failure per second at most", lists)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := oc.count("status", ""); n < 2000 {
			t.Fatalf("status reads once the list answers again = %d, want the checks to go on", n-1000)
		}
	})
}

// A list of booted locations fetched before a directory's event (its
// boot) cannot say that directory is gone: it is asked again. (Seen in
// the preview benchmark: a directory booted 0.1 s after another's check
// fetched the list was forgotten by its own first check.)
func TestStaleBootedListDoesNotForgetANewLocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &listingStub{ocStub: newStub()}
		oc.set("/a", "s", "connected")
		oc.set("/b", "s", "connected")
		cfg := noJitter()
		cfg.Backoff.Initial = 500 * time.Millisecond // a wake well within the list's second
		e, err := New(cfg, oc, Options{})
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
		time.Sleep(600 * time.Millisecond) // /a's check at 0.5 s fetched the list: [/a]
		synctest.Wait()
		oc.mu.Lock()
		oc.booted = append(oc.booted, "/b") // then /b boots
		oc.mu.Unlock()
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/b"})
		time.Sleep(time.Second) // /b's check at 1.1 s, within the list's second
		synctest.Wait()
		if n := oc.count("status", "/b"); n != 1 {
			t.Fatalf("/b, booted after the cached list was fetched, was read %d times (armed: %+v)", n, e.Snapshot().Directories)
		}
	})
}

// The engine asks "is dir booted?" as the client does
// (opencode.LocationListed): a listed "/p/" is /p, not a gone location.
func TestBootedListComparesCleanedPaths(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := &listingStub{ocStub: newStub()}
		oc.set("/p", "s", "connected")
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		oc.mu.Lock()
		oc.booted = []string{"/p/"}
		oc.mu.Unlock()
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/p"})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if oc.count("status", "/p") != 1 || len(e.Snapshot().Directories) != 1 {
			t.Fatalf("/p, listed as /p/, was forgotten (reads %d)", oc.count("status", "/p"))
		}
	})
}
