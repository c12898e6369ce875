//go:build !linux

package netwatch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// New returns the platform's source: network changes are watched through
// netlink, on Linux only (a source for macOS is built when a test on a Mac
// runs it), so Run fails at once and the daemon watches wakes alone.
func New() Source { return unsupported{} }

type unsupported struct{}

func (unsupported) Run(context.Context, func(bool)) error {
	return fmt.Errorf("netwatch: network changes are watched on Linux only, not on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
