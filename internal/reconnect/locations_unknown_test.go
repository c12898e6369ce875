package reconnect

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

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
