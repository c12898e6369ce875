package netwatch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// jumpClock is a wall clock that runs with the fake clock of a synctest
// bubble and can jump ahead of it, as the real wall clock does past the
// monotonic one while a machine sleeps.
type jumpClock struct{ ahead atomic.Int64 }

func (c *jumpClock) now() time.Time { return time.Now().Round(0).Add(time.Duration(c.ahead.Load())) }

func (c *jumpClock) jump(d time.Duration) { c.ahead.Add(int64(d)) }

func runDetector(t *testing.T, d WakeDetector) (<-chan Wake, func()) {
	wakes := make(chan Wake, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, wakes)
	}()
	return wakes, func() { cancel(); <-done }
}

// An hour of sleep 20 s after the start is one wake, seen at the next
// tick (30 s), with about the hour it slept.
func TestWakeDetected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var clock jumpClock
		start := time.Now()
		wakes, stop := runDetector(t, WakeDetector{Wall: clock.now})
		defer stop()
		time.Sleep(20 * time.Second)
		clock.jump(time.Hour)
		time.Sleep(10*time.Minute - 20*time.Second)
		synctest.Wait()
		if len(wakes) != 1 {
			t.Fatalf("%d wakes, want 1", len(wakes))
		}
		w := <-wakes
		if seen := w.At.Sub(start.Round(0).Add(time.Hour)); seen != 30*time.Second {
			t.Fatalf("wake seen %v after the start, want 30 s (the next 15 s tick)", seen)
		}
		if w.Slept != time.Hour {
			t.Fatalf("slept %v, want 1h", w.Slept)
		}
	})
}

// Without a jump there is no wake; nor for a jump within the threshold
// (7 s of a 15 s tick), nor for a wall clock set back.
func TestNoWakeWithoutJump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var clock jumpClock
		wakes, stop := runDetector(t, WakeDetector{Wall: clock.now})
		defer stop()
		time.Sleep(5 * time.Minute)
		clock.jump(7 * time.Second)
		time.Sleep(time.Minute)
		clock.jump(-time.Hour)
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(wakes) != 0 {
			t.Fatalf("%d wakes, want none", len(wakes))
		}
		clock.jump(8 * time.Second) // just over 7.5 s: a wake
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if len(wakes) != 1 {
			t.Fatalf("%d wakes after an 8 s jump, want 1", len(wakes))
		}
	})
}

// The comparison itself: a late tick (a stopped or starved process, both
// clocks advanced) is no wake; defaults are tailscale's.
func TestSlept(t *testing.T) {
	tick := 15 * time.Second
	for _, c := range []struct {
		wall, mono time.Duration
		want       bool
	}{
		{15 * time.Second, 15 * time.Second, false},
		{23 * time.Second, 15 * time.Second, true},  // 8 s unseen by the monotonic clock
		{22 * time.Second, 15 * time.Second, false}, // 7 s: within 150 %
		{10 * time.Minute, 10 * time.Minute, false}, // SIGSTOP for 10 min
		{10 * time.Minute, 15 * time.Second, true},  // slept
		{-time.Hour, 15 * time.Second, false},       // clock set back
	} {
		if _, got := slept(c.wall, c.mono, tick, 1.5); got != c.want {
			t.Errorf("wall %v mono %v: wake=%v, want %v", c.wall, c.mono, got, c.want)
		}
	}
	d := WakeDetector{}
	if d.tick() != 15*time.Second || d.factor() != 1.5 {
		t.Fatalf("defaults %v %v", d.tick(), d.factor())
	}
}

// burst is n changes 50 ms apart, the one at uplink (from 1) moving the
// way out.
type burst struct{ n, uplink int }

// fakeSource sends changes when told.
type fakeSource struct {
	bursts chan burst
	err    error
}

func (s *fakeSource) Run(ctx context.Context, changed func(uplink bool)) error {
	if s.err != nil {
		return s.err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-s.bursts:
			for i := range b.n {
				changed(i+1 == b.uplink)
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// A wake and the interface changes after it are one Change that Woke; an
// ordinary change alone is one that did not. A burst is Uplink when any
// of its changes moved the way out, however many did not after it.
func TestWatchChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var clock jumpClock
		src := &fakeSource{bursts: make(chan burst)}
		var mu sync.Mutex
		var got []Change
		var at []time.Duration
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			done <- WatchChanges(ctx, src, WakeDetector{Wall: clock.now}, func(c Change) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, c)
				at = append(at, time.Since(start))
			})
		}()
		time.Sleep(10 * time.Second)
		clock.jump(2 * time.Hour) // the lid was closed for two hours
		time.Sleep(5*time.Second + 100*time.Millisecond)
		src.bursts <- burst{n: 6} // Wi-Fi joins again right after the wake is seen
		time.Sleep(time.Minute)
		src.bursts <- burst{n: 1} // a container bridge comes up
		time.Sleep(time.Minute)
		src.bursts <- burst{n: 5, uplink: 2} // a VPN: its tunnel, its default route, its addresses
		time.Sleep(time.Minute)
		src.bursts <- burst{n: 1} // a bridge again: the last burst's Uplink is not kept
		time.Sleep(time.Minute)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []Change{{Woke: true, Wake: got[0].Wake}, {}, {Uplink: true}, {}}
		if !slices.Equal(got, want) || got[0].Wake.Slept != 2*time.Hour {
			t.Fatalf("changes %+v, want one that Woke (the wake and its burst), one ordinary, one Uplink, one ordinary", got)
		}
		if at[0] < 15*time.Second || at[0] > 16*time.Second {
			t.Fatalf("the wake was reported %v after the start, want within a second of the 15 s tick", at[0])
		}
	})
}

// A source that fails stops the watch with its error; without a source
// wakes alone are watched.
func TestWatchChangesSourceFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("no netlink")
		if err := WatchChanges(context.Background(), &fakeSource{err: boom}, WakeDetector{}, func(Change) {}); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		var clock jumpClock
		var n atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			done <- WatchChanges(ctx, nil, WakeDetector{Wall: clock.now}, func(c Change) {
				if c.Woke {
					n.Add(1)
				}
			})
		}()
		time.Sleep(time.Second)
		clock.jump(time.Hour)
		time.Sleep(time.Minute)
		cancel()
		if err := <-done; err != nil || n.Load() != 1 {
			t.Fatalf("err %v, %d wakes, want 1", err, n.Load())
		}
	})
}

// A wake shows as a wall-clock gap the monotonic clock did not see, so
// the default clock must read the wall clock alone: a time.Now() that
// kept its monotonic reading would make every wall-clock gap equal the
// monotonic one (Time.Sub prefers monotonic readings), and no real wake
// would ever be seen.
func TestDefaultWallClockHasNoMonotonicReading(t *testing.T) {
	w := WakeDetector{}.wall()
	if w != w.Round(0) || strings.Contains(w.String(), "m=") {
		t.Fatalf("the default wall clock reads %v: it carries a monotonic reading, so a suspend would never show as a gap", w)
	}
	later := w.Add(time.Hour)
	if gap := later.Sub(w); gap != time.Hour {
		t.Fatalf("a wall-clock jump of an hour reads as %v", gap)
	}
}
