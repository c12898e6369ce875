// Package netwatch tells the daemon when the machine's network changes in
// a way that may make an unreachable server reachable: a VPN tunnel coming
// up with an address, a default route moving, Wi-Fi joining a network.
// A change is a difference between two States (the interfaces that are up
// and carry a global unicast address, and the default routes), not every
// kernel message: container veths, link statistics and address refreshes
// are not changes, so a laptop does not reset failed servers all day.
// On Linux it listens on a netlink route socket, parked in Go's netpoller
// while idle; elsewhere (macOS included) it sees no network changes, and
// the daemon watches wakes from sleep alone (WakeDetector, on every
// system).
package netwatch

import (
	"context"
	"time"
)

// Source reports changes of the State; a burst of them is normal.
type Source interface {
	// Run calls changed for each change until ctx ends, with uplink set
	// when the change moved the way out of the machine (Uplink).
	Run(ctx context.Context, changed func(uplink bool)) error
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
		// Timers left running are collected (Go 1.23): no Stop needed.
		deadline, settle := time.After(most), time.NewTimer(quiet)
	burst:
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
				settle.Reset(quiet)
			case <-settle.C:
				break burst
			case <-deadline:
				break burst
			}
		}
		fn()
	}
}

// notify sends without blocking: one pending change is enough.
func notify(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
