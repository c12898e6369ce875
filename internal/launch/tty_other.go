//go:build !linux && !darwin

package launch

// isTTY is false where terminal attributes cannot be read here: run then
// relays every signal to the child, which is right for anything but a
// terminal's foreground process group.
func isTTY(uintptr) bool { return false }

// isForeground is false here: every signal is relayed.
func isForeground(uintptr) bool { return false }
