//go:build !linux

package procview

import (
	"errors"
	"fmt"
)

// Unavailable says why the process view does not run on this system: it
// reads Linux's /proc. A macOS process table and exit watcher are to be
// built when a Mac test can run them.
var Unavailable = fmt.Errorf("the process view runs on Linux only: %w", errors.ErrUnsupported)

// System fails here with Unavailable.
func System() (Table, error) { return nil, Unavailable }
