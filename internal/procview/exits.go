package procview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Exits tells of the exit of processes that are not this process's
// children (OpenCode's MCP servers) within milliseconds of it, where a
// scan finds it up to a period later. A supervisor is told of an exit
// when it happens (waitid, a pidfd); only a parent can wait, but the
// kernel tells anyone who holds a pidfd:
//
//   - Linux 5.3 and later: pidfd_open(2) works on any process, not only
//     a child, and the pidfd polls readable once the process has exited,
//     every thread of it (a process whose main thread ended first is
//     alive still), and is a zombie or already reaped. A pidfd pins the
//     process, not the number: a later process that reuses the pid is
//     never taken for it. Exits holds one pidfd per watched process in
//     one epoll set, and one goroutine (Run) sleeps in epoll_wait for
//     all of them, an eventfd waking it for Add, Close and the
//     end of its context.
//   - Elsewhere (the process view runs on Linux only), and on a Linux without pidfds (older than 5.3, or a
//     seccomp filter that answers ENOSYS or EPERM, as old container
//     runtimes' default profiles do), NewExits fails with
//     errors.ErrUnsupported: the caller keeps scanning.
//
// The cost on Linux, measured with 10,000 watched processes that are not
// children (exits_bench_test.go; 2-core VM, kernel 6.18, heavily loaded
// by other work): one descriptor per process, so the soft RLIMIT_NOFILE
// (which Go raises to the hard limit at start) bounds how many; 44-54
// bytes of Go heap per process (one map entry); about 1.2-1.8 KB of
// kernel memory per process (the pidfd's struct file, the pidfs inode
// and dentry of its pid, the epoll item), which the memory cgroup
// charges to the daemon: 12-18 MiB at 10,000, more than the heap. An
// idle Run is one blocked epoll_wait (strace: two calls in three
// seconds, the first cut short by the Go runtime's preemption signal):
// no CPU beyond the runtime's own. With 1,100 watched, an exit reached
// fn a median 1.2 ms after kill(2) (p99 16 ms, the machine's load),
// nearly all of it the kernel ending the process; Run's part is 12 µs.
//
// A process is named by its pid and birth (Process.Same): Add checks,
// after the kernel has pinned the process, that the pid still has the
// birth it was given, and a pid that is gone or born again is reported
// as exited at once instead of watching another process. An Add that
// fails (ErrNoWatch: no descriptor left) leaves that process to the
// caller's scans; the others stay watched. On Linux, Exits stops at
// three quarters of the soft RLIMIT_NOFILE of when NewExits ran, so that
// its pidfds never take the descriptors the daemon's connections and
// /proc reads need: 15,000 with the limit of 20,000 these machines have,
// 3,072 under the 4,096 of some distributions.
type Exits struct {
	mu sync.Mutex
	p  poller
	// watched holds the processes waited for, by pid; seq tells a
	// watch from an earlier one of the same pid whose event was
	// already taken from the kernel when Add replaced it.
	watched map[int]watch
	seq     uint32
	// max is how many this process may watch at once, with every Exits
	// together (watchLimit).
	max int
	// pending are exits Add found (gone before it was watched), for
	// Run to report.
	pending []Exit
	running bool
	closed  bool
	// released: the poller's own descriptors are closed.
	released bool
}

type watch struct {
	birth uint64
	fd    int32 // the pidfd
	seq   uint32
}

// Exit is the exit of a watched process.
type Exit struct {
	// PID and Birth are the process as given to Add.
	PID   int
	Birth uint64
	// At is when the exit was seen: when the kernel told Run, or when
	// Add found the process gone.
	At time.Time
}

// ErrNoWatch is wrapped by Add's error when the system has no room for
// one more watch (Linux: no file descriptor left, EMFILE or ENFILE, or
// no memory), or when watching one more would leave too few descriptors
// for the rest of the daemon (watchLimit): the caller keeps scanning for
// that process.
var ErrNoWatch = errors.New("no room to watch one more process")

// watchedHere counts the processes every Exits of this process watches:
// the descriptor limit is the process's, so the cap (watchLimit) is too.
var watchedHere atomic.Int64

// errWatchGone is what a poller returns from watch for a pid that does
// not exist.
var errWatchGone = errors.New("process gone")

// errExitsClosed is Add's error after Close.
var errExitsClosed = errors.New("procview: exit watcher closed")

// poller is the system's half of Exits. Every method but wait is called
// with Exits.mu held; wait is called by Run alone, without it, and close
// only when no wait runs.
type poller interface {
	// watch starts watching pid, tagging its events with seq; it
	// returns errWatchGone when pid does not exist, an error wrapping
	// ErrNoWatch when the system has no room.
	watch(pid int, seq uint32) (fd int32, err error)
	// unwatch stops watching pid (and closes fd).
	unwatch(pid int, fd int32)
	// wait blocks until a watched process exits or wake is called, and
	// returns what happened; nothing at all after an interruption.
	wait() ([]pollEvent, error)
	// wake makes a blocked (or the next) wait return.
	wake()
	// close releases the poller's own descriptors.
	close()
}

// pollEvent is one exit the kernel reported, with the watch's tag.
type pollEvent struct {
	pid int
	seq uint32
}

// NewExits starts watching nothing. The error wraps
// errors.ErrUnsupported where exits cannot be watched (see Exits).
func NewExits() (*Exits, error) {
	p, err := newPoller()
	if err != nil {
		return nil, err
	}
	e := newExits(p)
	e.max = watchLimit()
	return e, nil
}

func newExits(p poller) *Exits { return &Exits{p: p, watched: map[int]watch{}, max: math.MaxInt} }

// Add watches p, read from t: Run reports its exit once. A p that is
// gone already, a zombie, or whose pid now has another birth is reported
// as exited (by Run) and not watched. Adding a process watched already
// does nothing; adding its pid with another birth replaces the watch.
// The error wraps ErrNoWatch when the system has no room for it; any
// error leaves p unwatched.
func (e *Exits) Add(t Table, p Process) error {
	if p.PID <= 0 {
		return fmt.Errorf("procview: watch pid %d: not a process", p.PID)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errExitsClosed
	}
	if w, ok := e.watched[p.PID]; ok {
		if w.birth == p.Birth {
			return nil
		}
		e.p.unwatch(p.PID, w.fd)
		delete(e.watched, p.PID)
		watchedHere.Add(-1)
	}
	if slices.ContainsFunc(e.pending, func(x Exit) bool { return x.PID == p.PID && x.Birth == p.Birth }) {
		return nil // reported soon
	}
	if n := watchedHere.Load(); n >= int64(e.max) {
		return fmt.Errorf("procview: watch pid %d: %d watched by this daemon, the most that leaves descriptors for the rest of it: %w", p.PID, n, ErrNoWatch)
	}
	e.seq++
	fd, err := e.p.watch(p.PID, e.seq)
	if errors.Is(err, errWatchGone) {
		e.exited(p)
		return nil
	}
	if err != nil {
		return fmt.Errorf("procview: watch pid %d: %w", p.PID, err)
	}
	// The kernel holds the process now; make sure it is the one meant.
	st, err := t.Stat(p.PID)
	if err != nil && !errors.Is(err, ErrGone) {
		e.p.unwatch(p.PID, fd)
		if isNoRoom(err) {
			return fmt.Errorf("%w: %w", err, ErrNoWatch) // err names the pid
		}
		return err
	}
	if err != nil || st.Birth != p.Birth || st.Zombie {
		e.p.unwatch(p.PID, fd)
		e.exited(p)
		return nil
	}
	e.watched[p.PID] = watch{birth: p.Birth, fd: fd, seq: e.seq}
	watchedHere.Add(1)
	return nil
}

// noRoom wraps ErrNoWatch around the errors that say the system has no
// room for one more watch (isNoRoom, per system).
func noRoom(call string, err error) error {
	if isNoRoom(err) {
		return fmt.Errorf("%s: %w: %w", call, ErrNoWatch, err)
	}
	return fmt.Errorf("%s: %w", call, err)
}

// exited queues p's exit for Run. Called with e.mu held.
func (e *Exits) exited(p Process) {
	if len(e.pending) == 0 && e.running {
		e.p.wake()
	}
	e.pending = append(e.pending, Exit{PID: p.PID, Birth: p.Birth, At: time.Now()})
}

// Close stops watching every process and releases their descriptors;
// a Run returns, and releases the watcher's own two (the epoll set and
// the eventfd) as it does. Add fails after Close.
func (e *Exits) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	for pid, w := range e.watched {
		e.p.unwatch(pid, w.fd)
	}
	watchedHere.Add(-int64(len(e.watched)))
	clear(e.watched)
	e.pending = nil
	if e.running {
		e.p.wake()
	} else {
		e.release()
	}
	return nil
}

// release closes the poller. Called with e.mu held, when no wait runs.
func (e *Exits) release() {
	if !e.released {
		e.released = true
		e.p.close()
	}
}

// Run reports each exit to fn, on its own goroutine (the caller's), one
// at a time, until ctx ends or Close is called; a process is no longer
// watched when fn hears of it. fn may call Add. Exits found
// while no Run runs are reported by the next. One Run at a time.
func (e *Exits) Run(ctx context.Context, fn func(Exit)) {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		panic("procview: Exits.Run called while another Run runs")
	}
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.running = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.running = false
		if e.closed {
			e.release()
		}
	}()
	stop := context.AfterFunc(ctx, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if !e.released {
			e.p.wake()
		}
	})
	defer stop()

	var out []Exit
	for {
		e.mu.Lock()
		if e.closed || ctx.Err() != nil {
			e.mu.Unlock()
			return
		}
		out, e.pending = append(out[:0], e.pending...), nil
		e.mu.Unlock()
		for _, x := range out {
			fn(x)
		}

		evs, err := e.p.wait()
		if err != nil {
			// Only a bad descriptor or buffer fails a wait: not a
			// condition that a retry mends. The caller's scans remain.
			return
		}
		now := time.Now()
		out = out[:0]
		e.mu.Lock()
		for _, ev := range evs {
			w, ok := e.watched[ev.pid]
			if !ok || w.seq != ev.seq {
				continue // removed, or replaced, after the kernel spoke
			}
			delete(e.watched, ev.pid)
			watchedHere.Add(-1)
			e.p.unwatch(ev.pid, w.fd)
			out = append(out, Exit{PID: ev.pid, Birth: w.birth, At: now})
		}
		e.mu.Unlock()
		for _, x := range out {
			fn(x)
		}
	}
}
