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
	err   error // the request failed: shared like an answer
	// ask serialises the requests: a check that finds the list stale waits
	// for the one request under way instead of sending its own.
	ask sync.Mutex
}

// booted reports whether dir's location is booted; known is false when
// the server cannot tell (1.x, or no such route: then the check reads as
// before). A shared list older than since (the last event about dir) is
// asked again: the event may be dir's boot or its disposal. err is set
// when the list could not be had (the lister's ErrNotYet, a 5xx, a
// timeout): the check must neither read nor decide anything now, since
// reading a location that was disposed boots it again.
func (e *Engine) booted(ctx context.Context, dir string, since time.Time) (booted, known bool, err error) {
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
	dirs, known, err := c.dirs, c.known, c.err
	c.mu.Unlock()
	if !fresh {
		// Stamped when asked, not when answered: a directory booted while
		// the request was under way may be missing from the answer.
		sent := time.Now()
		dirs, known, err = l.BootedLocations(ctx)
		if ctx.Err() != nil {
			return false, false, ctx.Err() // this check ends: its answer is no one's
		}
		c.mu.Lock()
		c.at, c.dirs, c.known, c.err = sent, dirs, known, err
		c.mu.Unlock()
	}
	if err != nil {
		return false, false, err
	}
	if !known {
		return false, false, nil
	}
	return opencode.LocationListed(dirs, dir), true, nil
}

// bootedUnknown ends a check that could not learn whether its location
// is booted (booted's err): as for "not yet", every counter is kept, no
// slot is held, and the check comes again no sooner than the answer's
// Retry-After, else initial-delay doubling with each such failure in a
// row. A refused connection is OpenCode gone (rule 8).
func (e *Engine) bootedUnknown(d *dir, err error) {
	if errors.Is(err, opencode.ErrRefused) {
		e.OpenCodeGone(err)
		return
	}
	e.mu.Lock()
	wait, ok := opencode.RetryAfter(err)
	if !ok {
		d.listFails++
		wait = e.cfg.Backoff.Jittered(e.cfg.Backoff.Base(d.listFails))
	}
	e.mu.Unlock()
	e.notYet(d, err, time.Now(), wait)
}

// locationGone forgets a directory whose location is no longer booted.
func (e *Engine) locationGone(d *dir) {
	e.log.Info("location no longer booted in opencode; forgetting it until it is used again", "url", e.url, "directory", d.path)
	e.Disarm(d.path, "location gone")
	e.markGone(d.path)
}
