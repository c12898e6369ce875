//go:build !linux && !darwin

package registry

import "errors"

// readProc cannot tell a zombie here: kill(pid, 0) alone decides.
func readProc(int) (procInfo, error) {
	return procInfo{}, errors.New("process state not available on this system")
}
