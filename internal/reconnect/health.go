package reconnect

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// StuckAfter is how long past due a directory's check may be before the
// engine counts that directory's loop as stuck. A check is a config read
// and a status read, each bounded by opencode.DefaultTimeout (15 s), and
// a loop is late only by the check it is running, so a healthy loop is
// never anywhere near this late.
const StuckAfter = 2 * time.Minute

// ErrNotRunning is Alive's answer before Run started and after it ended.
var ErrNotRunning = errors.New("reconnect: engine not running")

// Alive reports whether the engine still does its job, for a supervisor
// (the systemd watchdog, GET /healthz): its lock can be taken within
// timeout (no loop holds it for ever), Run is running, and no armed
// directory's check is more than StuckAfter past due (its loop stopped
// turning) or has run for longer than that (it hangs). It never waits longer than timeout, however stuck the
// engine, so a caller can keep asking.
func (e *Engine) Alive(timeout time.Duration) error {
	if !e.tryLock(timeout) {
		return fmt.Errorf("reconnect: the engine of %s is stuck: its lock has been held for over %s", e.url, timeout)
	}
	defer e.mu.Unlock()
	if e.ctx == nil || e.ctx.Err() != nil {
		return ErrNotRunning
	}
	now := time.Now()
	for _, p := range opencode.Names(e.dirs) {
		d := e.dirs[p]
		if due := d.dueAt(); !due.IsZero() && now.Sub(due) > StuckAfter {
			late := now.Sub(due)
			return fmt.Errorf("reconnect: the engine of %s is stuck: the check of %s is %s past due", e.url, p, late.Round(time.Second))
		}
		if took := now.Sub(d.checking); !d.checking.IsZero() && took > StuckAfter {
			return fmt.Errorf("reconnect: the engine of %s is stuck: the check of %s has run for %s", e.url, p, took.Round(time.Second))
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
