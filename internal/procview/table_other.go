//go:build !linux && !darwin

package procview

import "errors"

// System is not available here: the process view knows Linux and macOS.
func System() (Table, error) {
	return nil, errors.New("procview: no process table reader for this system (Linux and macOS only)")
}
