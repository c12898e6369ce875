// queue.go holds the engine's one work queue, shaped like client-go's
// delaying workqueue: its keys are the armed directories' paths, each
// ready at a time; maxChecks workers (the check slots) take the ready
// ones first come first served, and a key is held by one worker at a
// time. Whatever asks for a directory's check, or brings it an outcome
// (a connect returned), adds its key; the worker's turn applies the
// outcomes and checks it if it is due.

package reconnect

import (
	"context"
	"slices"
	"sync"
	"time"
)

// queue is guarded by Engine.mu.
type queue struct {
	cond  sync.Cond        // on Engine.mu: a key is ready, or the queue shut down
	ready []string         // keys due and not held, in the order they came due
	state map[string]uint8 // qReady, qHeld, qDirty
	// delayed holds the keys due later, by time: with thousands of keys
	// and tens of adds a second, a sorted slice costs less than a heap.
	delayed []delayedKey
	kick    chan struct{} // delayed[0] moved earlier
	closed  bool
}

const (
	qReady = 1 << iota
	qHeld
	qDirty // added while held: ready again when its turn is done
)

type delayedKey struct {
	at  time.Time
	key string
}

// addAt makes k ready at t, or earlier if it is due earlier already: an
// added time never moves a key later.
func (q *queue) addAt(k string, t time.Time) {
	if !t.After(time.Now()) {
		q.add(k)
		return
	}
	if q.state[k]&qReady != 0 {
		return
	}
	if i := q.delayedAt(k); i >= 0 {
		if !t.Before(q.delayed[i].at) {
			return
		}
		q.delayed = slices.Delete(q.delayed, i, i+1)
	}
	i, _ := slices.BinarySearchFunc(q.delayed, t, func(x delayedKey, t time.Time) int { return x.at.Compare(t) })
	q.delayed = slices.Insert(q.delayed, i, delayedKey{t, k})
	if i == 0 {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
}

// add makes k ready now: at the back of the ready keys, or, while a
// worker holds it, once that worker is done.
func (q *queue) add(k string) {
	q.undelay(k)
	switch st := q.state[k]; {
	case st&qHeld != 0:
		q.state[k] = st | qDirty
	case st&qReady == 0:
		q.state[k] = qReady
		q.ready = append(q.ready, k)
		q.cond.Signal()
	}
}

func (q *queue) delayedAt(k string) int {
	return slices.IndexFunc(q.delayed, func(x delayedKey) bool { return x.key == k })
}

func (q *queue) undelay(k string) {
	if i := q.delayedAt(k); i >= 0 {
		q.delayed = slices.Delete(q.delayed, i, i+1)
	}
}

// forget drops k's time and its place among the ready keys; a worker
// that holds it does not get it again when done.
func (q *queue) forget(k string) {
	q.undelay(k)
	st := q.state[k]
	if st&qReady != 0 {
		q.ready = slices.DeleteFunc(q.ready, func(x string) bool { return x == k })
	}
	if st&qHeld != 0 {
		q.state[k] = qHeld
	} else {
		delete(q.state, k)
	}
}

// get waits for the first ready key and holds it for the caller, who
// calls done when its turn is over; false once the queue shut down.
func (q *queue) get() (string, bool) {
	for len(q.ready) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", false
	}
	k := q.ready[0]
	q.ready[0] = ""
	q.ready = q.ready[1:]
	q.state[k] = qHeld
	return k, true
}

// done ends k's turn: k is ready again if it was added meanwhile.
func (q *queue) done(k string) {
	if q.state[k]&qDirty != 0 {
		q.state[k] = qReady
		q.ready = append(q.ready, k)
		q.cond.Signal()
		return
	}
	delete(q.state, k)
}

// delays makes the delayed keys ready when their time comes, until ctx
// ends; then it shuts the queue down.
func (e *Engine) delays(ctx context.Context) {
	q := e.q
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		e.mu.Lock()
		now := time.Now()
		for len(q.delayed) > 0 && !q.delayed[0].at.After(now) {
			q.add(q.delayed[0].key) // which takes it out of delayed
		}
		wait := time.Hour
		if len(q.delayed) > 0 {
			wait = q.delayed[0].at.Sub(now)
		}
		e.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			e.mu.Lock()
			q.closed = true
			q.cond.Broadcast()
			e.mu.Unlock()
			return
		case <-q.kick:
		case <-timer.C:
		case <-e.budget.freed:
			e.mu.Lock()
			e.slotFreed()
			e.mu.Unlock()
		}
	}
}

// worker runs the turns of the keys it gets, one at a time, until the
// queue shuts down. The engine runs maxChecks of them: a check holds its
// worker, so a thousand directories armed together wait as keys for one
// rather than each holding a request, its buffers and a deep stack in the
// client's queue for a connection (the reads' pool has as many). The
// same few goroutines run every check: a check grows its stack to
// several KiB (the HTTP client's calls), and a fresh goroutine per check
// paid for that growth every time (BENCHMARKS.md, "Memory at scale").
func (e *Engine) worker() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		path, ok := e.q.get()
		if !ok {
			return
		}
		e.turn(path)
		e.q.done(path)
	}
}

// turn applies the outcomes of the connects of the directory at path that
// returned since its last turn, then checks it if it is due. Outcomes are
// applied only between checks, so a read sent before a connect returned
// never counts as that connect's outcome (rule 7). Caller holds Engine.mu.
func (e *Engine) turn(path string) {
	d := e.dirs[path]
	if d == nil {
		return // disarmed
	}
	for name, s := range d.servers {
		if s.returned {
			e.mu.Unlock()
			e.finishConnect(d, name, s)
			e.mu.Lock()
		}
	}
	if e.dirs[path] == d && !d.next.IsZero() && !time.Now().Before(d.dueAt()) {
		e.mu.Unlock()
		e.check(d.ctx, d)
		e.mu.Lock()
	} else if at := d.dueAt(); !at.IsZero() {
		e.q.addAt(path, at) // woken by an outcome, or by a time a hold moved later
	}
	if d.slotWoken != 0 { // a slot it was woken for and did not take is another's
		e.unwake(d)
		e.slotFreed()
	}
}
