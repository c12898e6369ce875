package reconnect

import (
	"context"
	"errors"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
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

func (l *listingStub) MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error) {
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

// A check of a directory OpenCode's events armed reads it only when the
// list of booted locations says it is booted. A list that could not be
// had (a 5xx, a timeout; not "no such route") is no permission to read:
// the location may have been disposed meanwhile, and the read would boot
// it again. The check waits (every counter kept, no slot held), asks
// again with backoff, and once the list answers, a location it does not
// name is forgotten, never read.
func TestBootedListFailureIsNotPermission(t *testing.T) {
	for _, listErr := range []error{
		fmt.Errorf("opencode at http://127.0.0.1:4096: GET /api/debug/location answered 502: %w", opencode.ErrUnavailable),
		fmt.Errorf("opencode at http://127.0.0.1:4096: GET /api/debug/location: timed out: %w", context.DeadlineExceeded),
	} {
		t.Run(listErr.Error(), func(t *testing.T) {
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
				oc.booted = []string{"/p"} // a session there: its location runs
				oc.mu.Unlock()
				e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.created", Directory: "/p"})
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if oc.count("status", "/p") != 1 {
					t.Fatalf("setup: /p read %d times", oc.count("status", "/p"))
				}
				// The list fails from now; meanwhile /p is disposed, and
				// its servers' status changes wake its check.
				oc.mu.Lock()
				oc.listErr = listErr
				lists := oc.lists
				oc.mu.Unlock()
				oc.dispose("/p")
				for range 3 {
					e.HandleEvent(opencode.Event{Kind: opencode.KindServerChanged, Type: "mcp.status.changed", Directory: "/p", Server: "s"})
				}
				time.Sleep(30 * time.Second)
				synctest.Wait()
				if oc.isBooted("/p") || oc.count("status", "/p") != 1 {
					t.Fatalf("while the list failed: /p booted %v, read %d times: the check read it without the list", oc.isBooted("/p"), oc.count("status", "/p"))
				}
				oc.mu.Lock()
				lists = oc.lists - lists
				oc.listErr = nil
				oc.mu.Unlock()
				// Asked at about 6, 7, 9, 13 and 21 s (1 s doubling).
				if lists < 3 || lists > 6 {
					t.Fatalf("the list asked %d times in 30 s of failures; want it asked again with backoff", lists)
				}
				if err := e.Alive(time.Second); err != nil {
					t.Fatalf("waiting for the list looks stuck: %v", err)
				}
				if s := e.Snapshot().Directories; len(s) != 1 || s[0].LastError == "" {
					t.Fatalf("while the list fails, /p = %+v; want it armed, saying why it waits", s)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				if oc.isBooted("/p") || oc.count("status", "/p") != 1 || len(e.Snapshot().Directories) != 0 {
					t.Fatalf("once the list answered without /p: booted %v, read %d times, armed %+v; want it forgotten, unread",
						oc.isBooted("/p"), oc.count("status", "/p"), e.Snapshot().Directories)
				}
			})
		})
	}
}
