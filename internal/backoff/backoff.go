// Package backoff holds the retry schedule as a value: how long to wait after
// the n-th failed attempt, with jitter, and when a fast episode turns into the
// slow tier. It knows nothing about OpenCode or goroutines, so every schedule
// the daemon follows can be tested on its own.
package backoff

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy is an exponential schedule with a fast episode and a slow tier.
// The zero value is not useful; start from Default.
type Policy struct {
	// Initial is the delay after the first attempt (default 1s).
	Initial time.Duration
	// Max caps the exponential delay (default 30s).
	Max time.Duration
	// Jitter multiplies each delay by a factor in [1-Jitter, 1+Jitter] (default 0.2).
	Jitter float64
	// FastAttempts is how many attempts one fast episode makes (default 5).
	// Zero means the fast episode never ends.
	FastAttempts int
	// SlowInterval is the delay between attempts once the fast episode is
	// spent (default 5m). Zero means no further attempt: give up until the
	// episode is reset from outside.
	SlowInterval time.Duration
}

// Default is the schedule of the SPEC's defaults: attempts 1, 2, 4, 8 and
// 16 s apart from the first, then every five minutes.
var Default = Policy{
	Initial:      time.Second,
	Max:          30 * time.Second,
	Jitter:       0.2,
	FastAttempts: 5,
	SlowInterval: 5 * time.Minute,
}

// Validate reports the first setting that cannot work, named by its flag.
func (p Policy) Validate() error {
	switch {
	case p.Initial <= 0:
		return errors.New("--initial-delay must be positive")
	case p.Max < p.Initial:
		return fmt.Errorf("--max-delay %s is below --initial-delay %s", p.Max, p.Initial)
	case p.Jitter < 0 || p.Jitter >= 1:
		return fmt.Errorf("--jitter %v must be in [0, 1)", p.Jitter)
	case p.FastAttempts < 0:
		return errors.New("--fast-attempts must not be negative")
	case p.SlowInterval < 0:
		return errors.New("--slow-interval must not be negative")
	}
	return nil
}

// Base is the un-jittered delay after the n-th attempt of a fast episode
// (n ≥ 1): Initial·2^(n-1), capped at Max.
func (p Policy) Base(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n; i++ {
		if d >= p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}

// Slow reports whether n attempts have spent the fast episode.
func (p Policy) Slow(n int) bool {
	return p.FastAttempts > 0 && n >= p.FastAttempts
}

// After is the delay to wait after the n-th attempt, before jitter, and
// whether there is to be another attempt at all. Once the fast episode is
// spent it is SlowInterval, or no attempt when SlowInterval is zero.
func (p Policy) After(n int) (time.Duration, bool) {
	if p.Slow(n) {
		return p.SlowInterval, p.SlowInterval > 0
	}
	return p.Base(n), true
}

// Hold is how long to wait after an attempt whose answer said "not yet"
// (a rate limit, OpenCode starting), the inARow-th such answer in a row,
// in an episode that has counted n attempts: the longer of the wait the
// answer asked for (asked, its Retry-After; zero when it said none),
// Initial·2^(inARow-1) (each answer in a row waits longer: OpenCode 2
// asks for one second while its service starts or stops, and a service
// stuck so must not be asked every second for ever) and, when the answer
// said no wait, the schedule's own delay after n attempts (a server that
// asks for time is never tried sooner than a failing one would be). The
// grown wait is jittered with the random number r in [0, 1); the wait
// the server asked for is waited out whole (asking sooner would only be
// refused again). It is never shorter than Initial and never longer than
// the slow tier's interval (Max when SlowInterval is zero: a server that
// asks for time is not a failing one to give up on, and once per Max is
// the slowest schedule left).
func (p Policy) Hold(asked time.Duration, n, inARow int, r float64) time.Duration {
	most := p.SlowInterval
	if most <= 0 {
		most = p.Max
	}
	most = max(most, p.Initial)
	d := p.Initial
	for i := 1; i < inARow && d < most; i++ {
		d *= 2
	}
	if after, again := p.After(n); asked <= 0 && n > 0 && again {
		d = max(d, after)
	}
	d = p.Apply(min(d, most), r)
	return min(max(d, p.Initial, asked), most)
}

// Apply jitters d with the random number r in [0, 1): the result lies in
// [d·(1-Jitter), d·(1+Jitter)].
func (p Policy) Apply(d time.Duration, r float64) time.Duration {
	if p.Jitter == 0 {
		return d
	}
	f := 1 - p.Jitter + 2*p.Jitter*r
	return time.Duration(float64(d) * f)
}

// Jittered is Apply with a random factor.
func (p Policy) Jittered(d time.Duration) time.Duration {
	return p.Apply(d, rand.Float64())
}
