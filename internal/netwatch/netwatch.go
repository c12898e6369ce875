// Package netwatch tells the daemon when the machine's network changes:
// an interface coming up or down, an address or a route appearing or
// going (a VPN connecting, Wi-Fi roaming). A change is a good moment to
// retry every failed server at once instead of waiting out its backoff.
// On Linux it listens on a netlink route socket; elsewhere it polls the
// interface list.
package netwatch

import (
	"context"
	"time"
)

// Source reports raw changes; a burst of them is normal.
type Source interface {
	// Run sends on changes until ctx ends.
	Run(ctx context.Context, changes chan<- struct{}) error
}

// Debounce turns a burst of raw changes into one notification: fn runs
// once the changes have been quiet for quiet, or at the latest most after
// the first of them, so the time from a change to fn stays bounded.
func Debounce(ctx context.Context, changes <-chan struct{}, quiet, most time.Duration, fn func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
		deadline := time.NewTimer(most)
		settle := time.NewTimer(quiet)
	burst:
		for {
			select {
			case <-ctx.Done():
				deadline.Stop()
				settle.Stop()
				return
			case <-changes:
				settle.Reset(quiet)
			case <-settle.C:
				break burst
			case <-deadline.C:
				break burst
			}
		}
		deadline.Stop()
		settle.Stop()
		fn()
	}
}

// Watch runs src and calls fn, debounced (200 ms quiet, 1 s at most),
// until ctx ends.
func Watch(ctx context.Context, src Source, fn func()) error {
	changes := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Debounce(ctx, changes, 200*time.Millisecond, time.Second, fn)
	}()
	err := src.Run(ctx, changes)
	cancel()
	<-done
	return err
}

// notify sends without blocking: one pending change is enough.
func notify(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
