package procview

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Reaper ends orphans that Orphans listed, one at a time.
type Reaper struct {
	// Table reads the process table (System()).
	Table Table
	// Scope is the user and the watched OpenCode processes; only that
	// user's processes whose parentage proves them orphans are ended.
	Scope Scope
	// Grace is how long a SIGTERM has before SIGKILL (default 5s).
	Grace time.Duration
	// Confirm, when set, is asked before each orphan is signalled
	// (doctor --reap asks the user); false leaves it alone.
	Confirm func(Orphan) bool

	// signal sends sig to pid once verify, run right before it, passed;
	// signalVerified unless a test says otherwise.
	signal func(pid int, sig syscall.Signal, verify func() error) error
}

// Reaped is how an orphan ended.
type Reaped struct {
	// Signal is the last signal sent: SIGTERM, or SIGKILL when SIGTERM
	// did not end it within the grace; 0 when it exited by itself before
	// the first.
	Signal syscall.Signal
	// After is the time from the first signal to its exit.
	After time.Duration
}

// Reap ends o: SIGTERM, then SIGKILL after the grace. Right before each
// signal it reads the process again and sends nothing unless it is still
// o (same pid and start time, so a reused pid is never hit), this
// user's, alive, adopted by init or a subreaper, and running the same
// command. A process that is gone by then is no error. On Linux the
// signal goes through a pidfd opened before that last check, so not even
// a pid reused in between can be hit.
func (r Reaper) Reap(ctx context.Context, o Orphan) (Reaped, error) {
	verify := func() error { return r.Scope.check(r.Table, o) }
	if err := verify(); err != nil {
		return Reaped{}, err
	}
	if r.Confirm != nil && !r.Confirm(o) {
		return Reaped{}, fmt.Errorf("procview: pid %d: %w", o.PID, ErrDeclined)
	}
	send := r.signal
	if send == nil {
		send = signalVerified
	}
	grace := r.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	start := time.Now()
	var last syscall.Signal
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGTERM, grace}, {syscall.SIGKILL, 2 * time.Second}} {
		if err := send(o.PID, step.sig, verify); err != nil {
			if errors.Is(err, ErrGone) || errors.Is(err, syscall.ESRCH) {
				return Reaped{Signal: last, After: time.Since(start)}, nil
			}
			return Reaped{}, fmt.Errorf("procview: %v to pid %d: %w", step.sig, o.PID, err)
		}
		last = step.sig
		ended, err := r.waitExit(ctx, o, step.wait)
		if err != nil {
			return Reaped{}, err
		}
		if ended {
			return Reaped{Signal: step.sig, After: time.Since(start)}, nil
		}
	}
	return Reaped{}, fmt.Errorf("procview: pid %d still runs after SIGKILL", o.PID)
}

// waitExit polls until o has exited (gone, a zombie, or its pid taken by
// another process) or wait passes.
func (r Reaper) waitExit(ctx context.Context, o Orphan, wait time.Duration) (bool, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := r.Table.Stat(o.PID)
		if errors.Is(err, ErrGone) || (err == nil && (p.Birth != o.Birth || p.Zombie)) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-tick.C:
		}
	}
}
