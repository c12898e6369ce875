package procview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"
)

// reapGrace is how long a SIGTERM has before SIGKILL (doctor --help says
// 5 s).
const reapGrace = 5 * time.Second

// Reaper ends orphans that Orphans listed, one at a time.
type Reaper struct {
	// Table reads the process table (System()).
	Table Table
	// Scope is the user, the watched OpenCode processes and the record;
	// only that user's processes proven orphans are ended.
	Scope Scope
	// Confirm, when set, is asked before each orphan is signalled
	// (doctor --reap asks the user); false leaves it alone.
	Confirm func(Orphan) bool

	// signal sends sig to pid once verify, run right before it, passed;
	// signalVerified unless a test says otherwise.
	signal func(pid int, sig syscall.Signal, verify func() error) error
}

// Reaped is how an orphan ended.
type Reaped struct {
	// Signal is the last signal sent to the orphan: SIGTERM, or SIGKILL
	// when SIGTERM did not end it within the grace; 0 when it exited by
	// itself before the first.
	Signal syscall.Signal
	// After is the time from the first signal to its exit (and that of
	// every process below it).
	After time.Duration
}

// Reap ends o and the processes listed below it (Orphan.Below): SIGTERM
// to each, then SIGKILL to those left after reapGrace. Right before each
// signal it reads the process again and sends nothing unless it is still
// the one listed (same pid and start time, so a reused pid is never hit),
// this user's and alive; o itself must also still run the same command,
// not be a child of a live OpenCode, and still be proven an orphan
// (Scope.prove). A process that is gone by then is no error. On Linux the
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
	start := time.Now()
	var res Reaped
	// left is what has not exited yet: the orphan first, then what is
	// below it, which may outlive it (a shell that dies on SIGTERM leaves
	// its sleeping child) and is ended too, on its own check.
	left := append([]Ident{{PID: o.PID, Birth: o.Birth}}, o.Below...)
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGTERM, reapGrace}, {syscall.SIGKILL, 2 * time.Second}} {
		kept := left[:0]
		for _, id := range left {
			if id.PID != o.PID {
				if send(id.PID, step.sig, func() error { _, err := r.Scope.mine(r.Table, id.PID, id.is); return err }) == nil {
					kept = append(kept, id) // else gone, or no longer the process listed
				}
				continue
			}
			switch err := send(o.PID, step.sig, verify); {
			case errors.Is(err, ErrGone) || errors.Is(err, syscall.ESRCH):
			case err != nil: // res is still zero at the first step
				return res, fmt.Errorf("procview: %v to pid %d: %w", step.sig, o.PID, err)
			default:
				res.Signal = step.sig
				kept = append(kept, id)
			}
		}
		left = kept
		ended, err := r.waitExit(ctx, &left, step.wait)
		if err != nil {
			return Reaped{}, err
		}
		if ended {
			res.After = time.Since(start)
			return res, nil
		}
	}
	return Reaped{}, fmt.Errorf("procview: pid %d still runs after SIGKILL", o.PID)
}

// waitExit polls until every process of left has exited (gone, a
// zombie, or its pid taken by another process), or wait passes; left
// keeps those that have not.
func (r Reaper) waitExit(ctx context.Context, left *[]Ident, wait time.Duration) (bool, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		*left = slices.DeleteFunc(*left, func(id Ident) bool {
			p, err := r.Table.Stat(id.PID)
			return errors.Is(err, ErrGone) || (err == nil && (p.Birth != id.Birth || p.Zombie))
		})
		if len(*left) == 0 {
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
