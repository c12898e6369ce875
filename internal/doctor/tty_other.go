//go:build !linux && !darwin

package doctor

// IsTerminal is false where terminal attributes cannot be read here:
// doctor --reap then needs --yes.
func IsTerminal(uintptr) bool { return false }
