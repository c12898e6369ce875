//go:build !linux

package procview

import (
	"errors"
	"fmt"
)

// verifyListener cannot tell here which process listens on a port (see
// ListenerPID); there are no pid namespaces either.
func verifyListener(_ Table, pid, port int) error {
	return fmt.Errorf("pid %d: which process listens on port %d cannot be read here: %w", pid, port, errors.ErrUnsupported)
}
