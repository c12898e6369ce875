package doctor

import "golang.org/x/sys/unix"

// IsTerminal reports whether fd is a terminal (it has terminal
// attributes; /dev/null, a character device too, has none): doctor --reap
// asks its questions only there.
func IsTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TIOCGETA)
	return err == nil
}
