//go:build !linux && !darwin

package netwatch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// New returns the platform's source: none here, so Run fails at once.
func New() Source { return unsupported{} }

type unsupported struct{}

func (unsupported) Run(context.Context, func(bool)) error {
	return fmt.Errorf("netwatch: network changes on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
