//go:build !linux && !darwin

package procview

import (
	"errors"
	"fmt"
)

// newPoller: exits are watched on Linux and macOS alone; elsewhere the
// caller scans.
func newPoller() (poller, error) {
	return nil, fmt.Errorf("procview: exits: not watched on this system: %w", errors.ErrUnsupported)
}

func isNoRoom(error) bool { return false }

func watchLimit() int { return 0 }
