package netwatch

import (
	"context"
	"sync"
	"time"
)

// WakeDetector notices that the machine slept. After a laptop wakes,
// remote MCP sessions are often dead while every interface and route
// looks as before, so no State differs and a Source sees nothing. The clocks
// tell: the monotonic clock Go's timers run on stops while the machine is
// suspended (CLOCK_MONOTONIC on Linux, mach_absolute_time on macOS), the
// wall clock does not. So the detector ticks, and a tick whose wall-clock
// gap since the last one exceeds the monotonic gap by more than
// (Factor-1)×Tick is a wake: with the tick on time, a wall-clock gap over
// 150 % of it (tailscale's netmon uses the same 15 s tick and 150 %
// threshold). The wake is seen at the first tick
// after it, up to Tick later. A process that was only stopped (SIGSTOP,
// a debugger) or starved sees both clocks advance alike: no wake. A wall
// clock stepped forward by more than Factor-1 ticks (a manual change, a
// large NTP step) counts as a wake; one stepped back never does.
type WakeDetector struct {
	// Tick is how often the clocks are compared (default 15s).
	Tick time.Duration
	// Factor: a wall-clock gap over Factor×Tick between two ticks on
	// time, more precisely the monotonic clock short of the wall clock
	// by more than (Factor-1)×Tick, is a wake (default 1.5).
	Factor float64
	// Wall reads the wall clock without its monotonic reading; nil is
	// time.Now().Round(0). Tests make it jump.
	Wall func() time.Time
}

// Wake is one detected sleep.
type Wake struct {
	// At is the wall-clock time the wake was seen.
	At time.Time
	// Slept is about how long the machine slept: the wall-clock time
	// the monotonic clock did not see.
	Slept time.Duration
}

func (d WakeDetector) tick() time.Duration {
	if d.Tick <= 0 {
		return 15 * time.Second
	}
	return d.Tick
}

func (d WakeDetector) factor() float64 {
	if d.Factor <= 1 {
		return 1.5
	}
	return d.Factor
}

func (d WakeDetector) wall() time.Time {
	if d.Wall != nil {
		return d.Wall().Round(0)
	}
	return time.Now().Round(0)
}

// slept compares the clocks between two ticks: wallGap and monoGap are
// what each advanced. The wall-clock time the monotonic clock missed is
// the sleep, if over (Factor-1)×Tick: with a tick on time, that is a
// wall-clock gap over Factor×Tick, tailscale's test, and a late tick (a
// stopped or starved process) adds to both gaps alike.
func slept(wallGap, monoGap, tick time.Duration, factor float64) (time.Duration, bool) {
	missing := wallGap - monoGap
	if missing > time.Duration((factor-1)*float64(tick)) {
		return missing, true
	}
	return 0, false
}

// Run sends a Wake on wakes for each sleep until ctx ends. It never
// fails; the error is for the Source-like signature.
func (d WakeDetector) Run(ctx context.Context, wakes chan<- Wake) error {
	tick := d.tick()
	t := time.NewTicker(tick)
	defer t.Stop()
	lastWall, lastMono := d.wall(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		wall, mono := d.wall(), time.Now()
		gap, ok := slept(wall.Sub(lastWall), mono.Sub(lastMono), tick, d.factor())
		lastWall, lastMono = wall, mono
		if !ok {
			continue
		}
		select {
		case wakes <- Wake{At: wall, Slept: gap}:
		case <-ctx.Done():
			return nil
		}
	}
}

// Change is one debounced notification of WatchChanges. Any change may
// make an unreachable server reachable; only some can have killed a
// connection held across them: a wake from sleep (every interface may look
// as before while the remote end dropped the session) and a change of the
// way out (Uplink: a VPN that takes over the default route resets every
// live socket).
type Change struct {
	// Woke: the machine woke from sleep among these changes.
	Woke bool
	// Wake is the last wake seen, when Woke.
	Wake Wake
	// Uplink: one of these changes moved the way out of the machine.
	Uplink bool
}

// WatchChanges runs src and the wake detector d together until ctx ends,
// and calls fn once per burst, debounced (Debounce: 200 ms quiet, 1 s
// at most): a wake and the interface changes that follow it (Wi-Fi
// joining again) are one Change, Woke, and it is Uplink if any change of
// the burst was. A nil src watches wakes alone.
// It returns src's error as soon as src fails, having stopped everything;
// a caller that still wants wakes then calls it again with a nil src.
func WatchChanges(ctx context.Context, src Source, d WakeDetector, fn func(Change)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes := make(chan struct{}, 1)
	wakes := make(chan Wake, 1)
	var mu sync.Mutex
	var pending Change // what came since the last fn
	var wg sync.WaitGroup
	wg.Go(func() { _ = d.Run(ctx, wakes) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case w := <-wakes:
				mu.Lock()
				pending.Woke, pending.Wake = true, w
				mu.Unlock()
				notify(changes)
			}
		}
	})
	wg.Go(func() {
		Debounce(ctx, changes, 200*time.Millisecond, time.Second, func() {
			mu.Lock()
			c := pending
			pending = Change{}
			mu.Unlock()
			fn(c)
		})
	})
	var err error
	if src != nil {
		err = src.Run(ctx, func(uplink bool) {
			mu.Lock()
			pending.Uplink = pending.Uplink || uplink
			mu.Unlock()
			notify(changes)
		})
	} else {
		<-ctx.Done()
	}
	cancel()
	wg.Wait()
	return err
}
