package reconnect

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// StuckAfter is how long a directory's checks may stop coming before the
// engine counts it as stuck: a check that has waited this long for one
// answer of OpenCode (every call has a timeout, 15 s for a read: a wait
// this long is a call that ignores it), a check whose own work
// since OpenCode's last answer took this long, or, between checks, a
// check this far past due.
const StuckAfter = 2 * time.Minute

// Alive's answers while the engine does not run. Both /healthz and the
// systemd watchdog decide by Stuck, so they never disagree.
var (
	// ErrNotStarted is the answer before Run: the daemon is starting (it
	// serves its status API before it has found OpenCode, which may take
	// as long as OpenCode does to come up). Not stuck: a restart would
	// only start again.
	ErrNotStarted = errors.New("reconnect: engine not started yet")
	// ErrStopped is the answer once Run has returned: the engine will
	// never check a directory again, and only a restart brings it back,
	// so it is stuck. (Run returns when the daemon shuts down; by then
	// nobody should be asking: the watchdog loop has said STOPPING=1 and
	// the status API is closing. An engine that stopped while the daemon
	// went on would be a daemon that no longer does its job.)
	ErrStopped = errors.New("reconnect: engine stopped")
)

// Stuck reports whether an answer of Alive means the daemon no longer
// does its job and a restart would help: any error but ErrNotStarted.
func Stuck(err error) bool { return err != nil && !errors.Is(err, ErrNotStarted) }

// Alive reports whether the engine still does its job, for a supervisor
// (the systemd watchdog, GET /healthz): its lock can be taken within
// timeout (nothing holds it for ever), Run is running, and no armed
// directory's checks stopped coming (StuckAfter). Waiting for OpenCode is
// not stuck, however slowly it answers and however many checks wait for
// one answer (a shared list of booted locations), as long as each answer
// comes within its call's timeout; nor is a check past due while the
// check before it waits so. It never waits longer than timeout, however
// stuck the engine, so a caller can keep asking.
func (e *Engine) Alive(timeout time.Duration) error {
	if !e.tryLock(timeout) {
		return fmt.Errorf("reconnect: the engine of %s is stuck: its lock has been held for over %s", e.url, timeout)
	}
	defer e.mu.Unlock()
	switch {
	case e.ctx == nil:
		return ErrNotStarted
	case e.ctx.Err() != nil:
		return ErrStopped
	}
	now := time.Now()
	for _, p := range opencode.Names(e.dirs) {
		d := e.dirs[p]
		switch {
		case !d.awaiting.IsZero():
			if took := now.Sub(d.awaiting); took > StuckAfter {
				return fmt.Errorf("reconnect: the engine of %s is stuck: the check of %s has waited %s for one answer of OpenCode, past every timeout", e.url, p, took.Round(time.Second))
			}
		case !d.checking.IsZero():
			if took := now.Sub(d.checking); took > StuckAfter {
				return fmt.Errorf("reconnect: the engine of %s is stuck: the check of %s has run for %s since OpenCode last answered it", e.url, p, took.Round(time.Second))
			}
		case e.q.state[p] != 0:
			// Waiting for a check slot (a worker), or in a turn with no
			// check: the checks that hold the slots are judged on their
			// own.
		default:
			if due := d.dueAt(); !due.IsZero() && now.Sub(due) > StuckAfter {
				return fmt.Errorf("reconnect: the engine of %s is stuck: the check of %s is %s past due", e.url, p, now.Sub(due).Round(time.Second))
			}
		}
	}
	return nil
}

// tryLock takes e.mu within timeout, polling: a waiter blocked in Lock
// could not give up, and would pile up behind a lock held for ever.
func (e *Engine) tryLock(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		if e.mu.TryLock() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(wait, left))
	}
}

// CurrentURL is the server's URL as Snapshot shows it, read without the
// engine's lock: a health check names the server even when the engine is
// stuck.
func (e *Engine) CurrentURL() string {
	if e.current != nil {
		return e.current()
	}
	return e.url
}
