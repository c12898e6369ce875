package launch

import "golang.org/x/sys/unix"

// isTTY reports whether fd is a terminal (it has terminal attributes).
func isTTY(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TIOCGETA)
	return err == nil
}

// isForeground reports whether this process's group is the foreground
// job of the terminal fd: only then does the kernel send the terminal's
// signals (Ctrl-C, Ctrl-\) to the whole group, the child included.
func isForeground(fd uintptr) bool {
	pg, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
	return err == nil && pg == unix.Getpgrp()
}
