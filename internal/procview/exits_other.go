//go:build !linux

package procview

import "fmt"

// newPoller: exits are watched on Linux alone; elsewhere there is no
// process view to watch for.
func newPoller() (poller, error) { return nil, fmt.Errorf("procview: exits: %w", Unavailable) }

func isNoRoom(error) bool { return false }

func watchLimit() int { return 0 }
