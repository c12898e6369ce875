// schedule.go holds the engine's scheduler: one timer heap of every armed
// directory's next step, each directory's mailbox of what its connects,
// probes and endpoint watches sent back, and the step itself. A directory
// has a goroutine only while it has work: a step that is due, or mail.

package reconnect

import (
	"container/heap"
	"context"
	"slices"
	"time"
)

// A step of a directory is what one turn of a loop per directory did,
// in the same order and at the same times: it reads its mail (finished
// connects, probes, endpoint restarts), one message at a time; when its
// time comes it starts the probes that are due and, when the directory
// is due, checks it. Between steps the directory waits in the heap, at
// the earliest of its next check and its next probe (an idle interval
// from now when neither is set). At most one step of a directory runs at
// a time, so a wake during a check is honoured after it, never as a
// second check in parallel.

// scheduler is the heap of directories waiting for their next step. Its
// fields, and a directory's schedule fields, are guarded by Engine.mu.
type scheduler struct {
	waiting dirHeap
	idle    time.Duration // a directory with nothing due looks again this late
	kick    chan struct{} // the earliest step moved earlier
	// handoff gives a step to a worker waiting for one (stepWorker);
	// done ends the waiting workers (the engine stops).
	handoff chan *dir
	done    <-chan struct{}
	// slotq holds the directories due for a check while every check
	// slot is taken, first come first served (admit, serveSlots).
	slotq []*dir
}

// schedule starts each directory's step when it is due, until ctx ends.
func (e *Engine) schedule(ctx context.Context) {
	s := e.sched
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		e.mu.Lock()
		now := time.Now()
		for len(s.waiting) > 0 && !s.waiting[0].stepAt.After(now) {
			if d := heap.Pop(&s.waiting).(*dir); e.slotFor(d, now) {
				e.startStepLocked(d)
			}
		}
		wait := time.Hour
		if len(s.waiting) > 0 {
			wait = s.waiting[0].stepAt.Sub(now)
		}
		e.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-timer.C:
		}
	}
}

// Check slots (maxChecks) are handed out first come first served: a
// directory due for a check takes a free one when none waits before it,
// else joins slotq, without a goroutine, until a check ends (serveSlots).
// A thousand directories armed at once wait there in the order they came
// due, not as a thousand goroutines in a channel's queue (which serves
// waiters in no order, and a step going on to its next check first).
// A directory in slotq is queued (d.queued), which Alive does not judge:
// the checks that hold the slots are judged on their own.

// slotFor reports whether d's step may run now: its check is not due, or
// it holds a slot, or it takes a free one no directory waits for before
// it. Otherwise d waits in slotq. Caller holds Engine.mu.
func (e *Engine) slotFor(d *dir, now time.Time) bool {
	if d.slot || !d.checkDue(now) {
		return true
	}
	if !d.inSlotQ && len(e.sched.slotq) == 0 && e.trySlot() {
		d.slot = true
		return true
	}
	if !d.inSlotQ {
		d.inSlotQ, d.queued = true, now
		e.sched.slotq = append(e.sched.slotq, d)
	}
	return false
}

func (e *Engine) trySlot() bool {
	select {
	case e.checks <- struct{}{}:
		return true
	default:
		return false
	}
}

// serveSlots hands free check slots to the directories in slotq, in
// order. A directory whose step runs (for its mail) finds its slot at its
// step's next turn. Its queued time stays until its check begins, so it
// is never judged in between. Caller holds Engine.mu.
func (e *Engine) serveSlots() {
	q := &e.sched.slotq
	for len(*q) > 0 && e.trySlot() {
		d := (*q)[0]
		(*q)[0] = nil
		*q = (*q)[1:]
		d.inSlotQ, d.slot = false, true
		if !d.running {
			e.startStepLocked(d)
		}
	}
}

// dropSlot gives back the check slot d's step holds for a check that did
// not run after all, and takes d out of slotq. Caller holds Engine.mu.
func (e *Engine) dropSlot(d *dir) {
	if d.inSlotQ {
		d.inSlotQ = false
		e.sched.slotq = slices.DeleteFunc(e.sched.slotq, func(x *dir) bool { return x == d })
	}
	d.queued = time.Time{}
	if d.slot {
		d.slot = false
		<-e.checks
		e.serveSlots()
	}
}

// checkDue reports whether d's check is due at now. Caller holds
// Engine.mu.
func (d *dir) checkDue(now time.Time) bool {
	return !d.next.IsZero() && !now.Before(d.dueAt())
}

// stepTime is when d's next step is due: its next check or the earliest
// probe not under way, else an idle interval from now. Caller holds
// Engine.mu.
func (d *dir) stepTime(idle time.Duration) time.Time {
	at := d.dueAt()
	for _, s := range d.servers {
		if w := s.endpoint; w != nil && !w.probing {
			at = earlier(at, w.nextProbe)
		}
	}
	if at.IsZero() {
		at = time.Now().Add(idle)
	}
	return at
}

// moved puts a waiting d at its step time again after its schedule
// changed (wakeBy). A running step needs nothing: it looks when it ends.
// Caller holds Engine.mu.
func (s *scheduler) moved(d *dir) {
	if s == nil || d.index < 0 {
		return
	}
	d.stepAt = d.stepTime(s.idle)
	heap.Fix(&s.waiting, d.index)
	s.kickIfFirst(d)
}

// wait puts d in the heap at its step time. Caller holds Engine.mu.
func (s *scheduler) wait(d *dir, at time.Time) {
	d.stepAt = at
	heap.Push(&s.waiting, d)
	s.kickIfFirst(d)
}

func (s *scheduler) kickIfFirst(d *dir) {
	if d.index == 0 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// startStepLocked runs a step of d, which is in no heap, on a worker
// that waits for one, else on a new one. Caller holds Engine.mu.
func (e *Engine) startStepLocked(d *dir) {
	d.running = true
	select {
	case e.sched.handoff <- d:
		return
	default:
	}
	e.wg.Add(1)
	go e.stepWorker(d)
}

// stepWorker runs d's step, then the steps handed to it, until none came
// for stepLinger. A check grows its goroutine's stack to several KiB (the
// HTTP client's calls): on a fresh goroutine for each of a thousand
// directories' idle checks, copying stacks as they grew was a tenth of
// the daemon's idle CPU (BENCHMARKS.md, "Memory at scale").
func (e *Engine) stepWorker(d *dir) {
	defer e.wg.Done()
	linger := time.NewTimer(stepLinger)
	defer linger.Stop()
	for {
		e.step(d)
		linger.Reset(stepLinger)
		select {
		case d = <-e.sched.handoff:
		case <-linger.C:
			return
		case <-e.sched.done:
			return
		}
	}
}

// stepLinger is how long a worker waits for another step: longer than the
// idle grid's step (one second), so the idle checks of many directories,
// batched on it, reuse the same few workers.
const stepLinger = 5 * time.Second

// post hands fn (the outcome of something d started) to d's step: a new
// one when none runs, else the running one after what it does now. It
// never blocks; once d is disarmed, fn is dropped.
func (e *Engine) post(d *dir, fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d.sched == nil || d.stopped || d.ctx.Err() != nil {
		return
	}
	d.mail = append(d.mail, fn)
	if !d.running {
		if d.index >= 0 {
			heap.Remove(&d.sched.waiting, d.index)
		} // else it waits in slotq, and keeps its place there
		e.startStepLocked(d)
	}
}

// step runs d's work until none is left, then puts d back in the heap;
// once d is disarmed it ends the directory instead (endLoop).
func (e *Engine) step(d *dir) {
	ctx := d.ctx
	for {
		e.mu.Lock()
		if d.stopped || ctx.Err() != nil {
			d.stopped = true
			e.dropSlot(d)
			e.mu.Unlock()
			e.endLoop(d)
			return // d stays running: nothing starts a step of it again
		}
		if len(d.mail) > 0 {
			fn := d.mail[0]
			d.mail[0] = nil
			d.mail = d.mail[1:]
			e.mu.Unlock()
			fn()
			continue
		}
		at := d.stepTime(e.sched.idle)
		if at.After(time.Now()) {
			e.dropSlot(d)
			d.running = false
			d.mail = nil // reuse would keep the old messages' array alive
			e.sched.wait(d, at)
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		e.startProbes(ctx, d, &d.work)
		e.mu.Lock()
		now := time.Now()
		due := d.checkDue(now)
		if due && !e.slotFor(d, now) {
			if len(d.mail) > 0 {
				e.mu.Unlock()
				continue
			}
			d.running = false // it waits in slotq; serveSlots starts it
			d.mail = nil
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if due {
			e.check(ctx, d, &d.work)
		}
	}
}

// stopLocked disarms d: its context ends, it leaves the heap, and its
// end (endLoop) runs now, or after the step running now. Caller holds
// Engine.mu.
func (e *Engine) stopLocked(d *dir) {
	d.cancel()
	if d.stopped || d.sched == nil {
		return
	}
	d.stopped = true
	if d.running {
		return
	}
	if d.inSlotQ {
		e.dropSlot(d)
	} else {
		heap.Remove(&d.sched.waiting, d.index)
	}
	d.running = true
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.endLoop(d)
	}()
}

// dirHeap orders waiting directories by their step time (container/heap).
type dirHeap []*dir

func (h dirHeap) Len() int           { return len(h) }
func (h dirHeap) Less(i, j int) bool { return h[i].stepAt.Before(h[j].stepAt) }
func (h dirHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dirHeap) Push(x any) {
	d := x.(*dir)
	d.index = len(*h)
	*h = append(*h, d)
}
func (h *dirHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	d.index = -1
	return d
}
