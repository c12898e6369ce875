//go:build !linux && !darwin

package netwatch

// New returns the platform's source: polling, where netlink is missing.
func New() Source { return Poll{} }
