package procview

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// Len is the number of processes e watches (not counting exits found by
// Add and not yet reported).
func (e *Exits) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.watched)
}

// The bookkeeping of Exits over a poller in memory, so that synctest can
// see Run block (it cannot see into epoll_wait). exits_linux_test.go has
// the kernel's half.

// fakePoller is a poller whose kernel is the test.
type fakePoller struct {
	mu       sync.Mutex
	watching map[int]uint32 // pid → seq
	gone     map[int]bool   // watch answers errWatchGone
	full     bool           // watch answers ErrNoWatch
	fds      int            // "descriptors" open, the poller's own included
	closed   int            // close calls
	events   chan []pollEvent
	woke     chan struct{}
}

func newFakePoller() *fakePoller {
	return &fakePoller{watching: map[int]uint32{}, gone: map[int]bool{}, fds: 2,
		events: make(chan []pollEvent), woke: make(chan struct{}, 1)}
}

func (f *fakePoller) watch(pid int, seq uint32) (int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone[pid] {
		return -1, errWatchGone
	}
	if f.full {
		return -1, ErrNoWatch
	}
	if _, ok := f.watching[pid]; ok {
		panic("pid watched twice")
	}
	f.watching[pid] = seq
	f.fds++
	return int32(1000 + pid), nil
}

func (f *fakePoller) unwatch(pid int, fd int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.watching[pid]; !ok || fd != int32(1000+pid) {
		panic("unwatch of a pid not watched")
	}
	delete(f.watching, pid)
	f.fds--
}

func (f *fakePoller) wait() ([]pollEvent, error) {
	select {
	case evs := <-f.events:
		return evs, nil
	case <-f.woke:
		return nil, nil
	}
}

func (f *fakePoller) wake() {
	select {
	case f.woke <- struct{}{}:
	default:
	}
}

func (f *fakePoller) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	f.fds -= 2
}

func (f *fakePoller) seqOf(pid int) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watching[pid]
}

func (f *fakePoller) open() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fds
}

// exitLog collects what Run reports.
type exitLog struct {
	mu  sync.Mutex
	got []Exit
}

func (l *exitLog) add(x Exit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, x)
}

func (l *exitLog) pids() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, x := range l.got {
		out = append(out, x.PID)
	}
	return out
}

// startRun runs e.Run on a goroutine until the returned stop is called
// (or the test ends), and waits for it.
func startRun(t *testing.T, e *Exits, fn func(Exit)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx, fn)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

func sleeper(pid int, birth uint64) Process {
	return Process{PID: pid, PPID: 1, UID: ana, Birth: birth, Comm: "sleep"}
}

// An exit the kernel reported for a watch that Add replaced (the pid
// reused) before Run read it belongs to the old process: the new one stays
// watched, and its own exit is reported.
func TestExitsIgnoresTheEventOfAReplacedWatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakePoller()
		e := newExits(f)
		tab := newMemTable(sleeper(5, 100))
		must(t, e.Add(tab, sleeper(5, 100)))
		old := f.seqOf(5)
		tab.put(sleeper(5, 200)) // the pid reused
		must(t, e.Add(tab, sleeper(5, 200)))
		var log exitLog
		startRun(t, e, log.add)
		f.events <- []pollEvent{{pid: 5, seq: old}}
		synctest.Wait()
		if got := log.pids(); len(got) != 0 || e.Len() != 1 {
			t.Fatalf("the old watch's event reported %v (watched %d)", got, e.Len())
		}
		f.events <- []pollEvent{{pid: 5, seq: f.seqOf(5)}}
		synctest.Wait()
		if len(log.got) != 1 || log.got[0].PID != 5 || log.got[0].Birth != 200 || e.Len() != 0 || f.open() != 2 {
			t.Fatalf("reported %+v, watched %d, %d open; want pid 5 birth 200, none, 2", log.got, e.Len(), f.open())
		}
		must(t, e.Close())
	})
}

// Add reports, rather than watches, a pid that is gone, a zombie, or
// another process than the one meant; Run reports them when it starts,
// once each.
func TestExitsReportsWhatAddFindsGone(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakePoller()
		e := newExits(f)
		zombie := sleeper(11, 1)
		zombie.Zombie = true
		tab := newMemTable(sleeper(10, 1), zombie, sleeper(12, 7), sleeper(14, 1))
		f.gone[13] = true
		must(t, e.Add(tab, sleeper(10, 1)))  // watched
		must(t, e.Add(tab, zombie))          // exited already
		must(t, e.Add(tab, sleeper(12, 1)))  // pid 12 is another process (birth 7)
		must(t, e.Add(tab, sleeper(13, 1)))  // the kernel knows no pid 13
		must(t, e.Add(tab, sleeper(13, 1)))  // once is enough
		must(t, e.Add(tab, sleeper(14, 1)))  // watched
		must(t, e.Add(tab, sleeper(15, 1)))  // the kernel watches it, the table has none
		must(t, e.Add(tab, sleeper(14, 99))) // replaced by a process that is not there
		if e.Len() != 1 || f.open() != 3 {
			t.Fatalf("watched %d with %d open, want 1 with 3", e.Len(), f.open())
		}
		var log exitLog
		startRun(t, e, log.add)
		synctest.Wait()
		want := []Exit{{PID: 11, Birth: 1}, {PID: 12, Birth: 1}, {PID: 13, Birth: 1}, {PID: 15, Birth: 1}, {PID: 14, Birth: 99}}
		got := slices.Clone(log.got)
		for i := range got {
			got[i].At = time.Time{}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("reported %+v, want %+v", got, want)
		}
		must(t, e.Close())
	})
}

// A process found gone while Run runs is reported at once, and fn may
// call Add.
func TestExitsFnMayAdd(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakePoller()
		e := newExits(f)
		tab := newMemTable(sleeper(20, 1), sleeper(21, 1), sleeper(22, 1))
		must(t, e.Add(tab, sleeper(20, 1)))
		must(t, e.Add(tab, sleeper(22, 1)))
		var log exitLog
		startRun(t, e, func(x Exit) {
			log.add(x)
			if x.PID == 20 {
				must(t, e.Add(tab, sleeper(21, 1)))
				must(t, e.Add(tab, sleeper(23, 1))) // not in the table: exited
			}
		})
		f.events <- []pollEvent{{pid: 20, seq: f.seqOf(20)}}
		synctest.Wait()
		if got := log.pids(); !slices.Equal(got, []int{20, 23}) || e.Len() != 2 {
			t.Fatalf("reported %v with %d watched, want [20 23] with 2 (pids 21, 22)", got, e.Len())
		}
		must(t, e.Close())
	})
}

// Close wakes a blocked Run, which releases the poller; an Add after it
// fails, a second Close does nothing.
func TestExitsCloseEndsRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakePoller()
		e := newExits(f)
		tab := newMemTable(sleeper(30, 1))
		must(t, e.Add(tab, sleeper(30, 1)))
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.Run(context.Background(), func(Exit) { t.Error("reported") })
		}()
		synctest.Wait()
		must(t, e.Close())
		<-done
		if f.open() != 0 || f.closed != 1 || e.Len() != 0 {
			t.Fatalf("%d open, closed %d times, %d watched after Close", f.open(), f.closed, e.Len())
		}
		if err := e.Add(tab, sleeper(30, 1)); err == nil {
			t.Fatal("Add after Close succeeded")
		}
		must(t, e.Close())
		e.Run(context.Background(), func(Exit) {}) // returns at once
	})
}

// The end of Run's context ends Run and nothing else: the watches stay,
// and an exit found meanwhile is reported by the next Run.
func TestExitsContextEndsRunOnly(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakePoller()
		e := newExits(f)
		tab := newMemTable(sleeper(40, 1))
		must(t, e.Add(tab, sleeper(40, 1)))
		var log exitLog
		stop := startRun(t, e, log.add)
		synctest.Wait()
		stop()
		if e.Len() != 1 || f.closed != 0 {
			t.Fatalf("after the context ended: %d watched, closed %d times", e.Len(), f.closed)
		}
		must(t, e.Add(tab, sleeper(41, 1))) // gone
		startRun(t, e, log.add)
		synctest.Wait()
		if got := log.pids(); !slices.Equal(got, []int{41}) {
			t.Fatalf("the second Run reported %v, want [41]", got)
		}
		must(t, e.Close())
	})
}

// No room, in the system or under Exits' own limit: Add says so in a
// way the caller can tell, and watches nothing more.
func TestExitsNoRoomIsErrNoWatch(t *testing.T) {
	f := newFakePoller()
	e := newExits(f)
	defer e.Close()
	tab := newMemTable(sleeper(50, 1), sleeper(51, 1))
	f.full = true
	err := e.Add(tab, sleeper(50, 1))
	if !errors.Is(err, ErrNoWatch) || e.Len() != 0 {
		t.Fatalf("Add = %v with %d watched, want ErrNoWatch and none", err, e.Len())
	}
	f.full = false
	e.max = 1
	must(t, e.Add(tab, sleeper(50, 1)))
	if err := e.Add(tab, sleeper(51, 1)); !errors.Is(err, ErrNoWatch) || e.Len() != 1 {
		t.Fatalf("Add past the limit = %v with %d watched, want ErrNoWatch and 1", err, e.Len())
	}
	must(t, e.Add(tab, sleeper(50, 1))) // watched already: no new watch
}

// Two Runs at once is a mistake of the caller.
func TestExitsOneRunAtATime(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		e := newExits(newFakePoller())
		startRun(t, e, func(Exit) {})
		synctest.Wait()
		defer func() {
			if recover() == nil {
				t.Error("a second Run did not panic")
			}
			must(t, e.Close())
		}()
		e.Run(context.Background(), func(Exit) {})
	})
}
