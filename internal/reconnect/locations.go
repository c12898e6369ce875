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
// disposal (no location.shutdown: docs/opencode.md#the-v2-preview-build-measured): a location
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
	mu sync.Mutex
	// last is the last request answered (its err shared like an answer),
	// nil before one was.
	last *bootedFlight
	// flight is the request under way, nil when none: a check that finds
	// the list stale waits for it instead of sending its own, when it was
	// sent late enough for that check.
	flight *bootedFlight
}

// bootedFlight is one request for the booted locations, and its answer
// once done is closed.
type bootedFlight struct {
	sent  time.Time
	done  chan struct{}
	dirs  []string
	known bool
	err   error
	cut   bool // its check went away mid-request: the answer is no one's
}

// booted reports whether dir's location is booted; known is false when
// the server cannot tell (1.x, or no such route: then the check reads as
// before). A shared list older than since (the last event about dir) is
// asked again: the event may be dir's boot or its disposal. err is set
// when the list could not be had (the lister's ErrNotYet, a 5xx, a
// timeout): the check must neither read nor decide anything now, since
// reading a location that was disposed boots it again.
//
// A check that finds a request under way, sent no earlier than since,
// takes its answer however long it takes: the answer is as new as the
// check needs. (Waiting in line to send a request of its own, each
// waiter found the one before stale, older than bootedTTL once a slow
// server answered: sixty directories waited ten minutes for a list a
// server answered in ten seconds.)
func (e *Engine) booted(ctx context.Context, dir string, since time.Time) (booted, known bool, err error) {
	l, ok := e.oc.(LocationLister)
	if !ok {
		return false, false, nil
	}
	c := &e.bootedList
	var f *bootedFlight // the answer this check takes
	for {
		c.mu.Lock()
		// A list older than the directory's last event says nothing about
		// it: the event may be its boot, or its disposal.
		if f = c.last; f != nil && time.Since(f.sent) < bootedTTL && !f.sent.Before(since) {
			c.mu.Unlock()
			break
		}
		if f = c.flight; f != nil {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return false, false, ctx.Err()
			}
			if !f.cut && !f.sent.Before(since) {
				break
			}
			continue // sent before this directory's event, or cut short
		}
		// Stamped when asked, not when answered: a directory booted while
		// the request was under way may be missing from the answer.
		f = &bootedFlight{sent: time.Now(), done: make(chan struct{})}
		c.flight = f
		c.mu.Unlock()
		f.dirs, f.known, f.err = l.BootedLocations(ctx)
		c.mu.Lock()
		c.flight = nil
		if f.cut = ctx.Err() != nil; !f.cut {
			c.last = f
		}
		c.mu.Unlock()
		close(f.done)
		if f.cut {
			return false, false, ctx.Err() // this check ends: its answer is no one's
		}
		break
	}
	if f.err != nil || !f.known {
		return false, false, f.err
	}
	return opencode.LocationListed(f.dirs, dir), true, nil
}

// bootedUnknown ends a check that could not learn whether its location
// is booted (booted's err): as for "not yet", every counter is kept, no
// slot is held, and the check comes again no sooner than the answer's
// Retry-After, else initial-delay doubling with each such failure in a
// row. A refused connection is OpenCode gone, which the server told the
// engine before the request returned (rule 8).
func (e *Engine) bootedUnknown(d *dir, err error) {
	if errors.Is(err, opencode.ErrRefused) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	wait, ok := opencode.RetryAfter(err)
	if !ok {
		d.listFails++
		wait = e.cfg.Backoff.Jittered(e.cfg.Backoff.Base(d.listFails))
	}
	d.lastCheck = time.Now()
	e.holdLocked(d, err, d.lastCheck, wait)
}
