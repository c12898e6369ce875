//go:build !linux && !darwin

package launch

// isForeground is false where the terminal's foreground job cannot be
// read here: run then relays every signal to the child, which is right
// for anything but a terminal's foreground process group.
func isForeground(uintptr) bool { return false }
