package reconnect

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// OpenCode 2 boots a directory's location (and every MCP server it
// configures) for any request that names it, and some builds announce no
// disposal (no location.shutdown: the v2 facts, section 6): a location
// disposed or evicted behind the daemon's back would be booted again by its
// next check, often woken by the very status changes the disposal caused.
// Where the server can list its booted locations without booting one, a
// check of a directory the user did not name first asks whether its
// location is still booted; one that is gone is forgotten until activity
// arms it again.

// LocationLister is what an OpenCode offers when it can list its booted
// locations without booting one (OpenCode 2's GET /api/debug/location).
// known is false when it cannot tell (1.x, or a 2.x without the route): the
// engine then reads as before. An error matching opencode.ErrNotYet says
// that whether it can tell is still to be learned (its API description
// could not be read yet), or that OpenCode is starting: the check waits.
type LocationLister interface {
	BootedLocations(ctx context.Context) (dirs []string, known bool, err error)
}

// bootedTTL is how long one list of booted locations answers every check:
// idle checks are batched on a one-second grid, so the checks due in one
// second share one request.
const bootedTTL = time.Second

// bootedCache shares one list of booted locations among the checks of an
// engine, one request at a time.
type bootedCache struct {
	mu    sync.Mutex
	at    time.Time
	dirs  []string
	known bool
	// ask serialises the requests: a check that finds the list stale waits
	// for the one request under way instead of sending its own.
	ask sync.Mutex
}

// booted reports whether dir's location is booted; known is false when
// the server cannot tell or the list could not be read (then the check
// reads as before: an unreadable list is no news). A shared list older
// than since (the last event about dir) is asked again: the event may be
// dir's boot or its disposal. notYet is the lister's ErrNotYet: the
// check must neither read nor decide anything until it has passed.
func (e *Engine) booted(ctx context.Context, dir string, since time.Time) (booted, known bool, notYet error) {
	l, ok := e.oc.(LocationLister)
	if !ok {
		return false, false, nil
	}
	c := &e.bootedList
	c.ask.Lock()
	defer c.ask.Unlock()
	c.mu.Lock()
	// A list older than the directory's last event says nothing about
	// it: the event may be its boot, or its disposal.
	fresh := !c.at.IsZero() && time.Since(c.at) < bootedTTL && !c.at.Before(since)
	dirs, known := c.dirs, c.known
	c.mu.Unlock()
	if !fresh {
		// Stamped when asked, not when answered: a directory booted while
		// the request was under way may be missing from the answer.
		sent := time.Now()
		var err error
		dirs, known, err = l.BootedLocations(ctx)
		if errors.Is(err, opencode.ErrNotYet) {
			return false, false, err
		}
		if err != nil {
			return false, false, nil
		}
		c.mu.Lock()
		c.at, c.dirs, c.known = sent, dirs, known
		c.mu.Unlock()
	}
	if !known {
		return false, false, nil
	}
	return opencode.LocationListed(dirs, dir), true, nil
}

// locationGone forgets a directory whose location is no longer booted.
func (e *Engine) locationGone(d *dir) {
	e.log.Info("location no longer booted in opencode; forgetting it until it is used again", "url", e.url, "directory", d.path)
	e.Disarm(d.path, "location gone")
	e.markGone(d.path)
}
