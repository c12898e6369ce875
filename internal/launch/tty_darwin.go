package launch

import "golang.org/x/sys/unix"

// isTTY reports whether fd is a terminal (it has terminal attributes).
func isTTY(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TIOCGETA)
	return err == nil
}
