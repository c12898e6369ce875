package netwatch

import (
	"context"
	"time"
)

// Poll compares the State read through the standard library every
// Interval: the fallback where the system offers no change notification.
// It sees interfaces and their addresses, not routes.
type Poll struct {
	// Interval between looks (default 5s).
	Interval time.Duration
	// read reads the State; interfaceState unless a test says otherwise.
	read func() (State, error)
}

// Run implements Source.
func (p Poll) Run(ctx context.Context, changes chan<- struct{}) error {
	every := p.Interval
	if every <= 0 {
		every = 5 * time.Second
	}
	read := p.read
	if read == nil {
		read = interfaceState
	}
	last, err := read()
	if err != nil {
		return err
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now, err := read()
		if err != nil {
			continue // a failed look is no news; the next one may work
		}
		if !now.Equal(last) {
			last = now
			notify(changes)
		}
	}
}
