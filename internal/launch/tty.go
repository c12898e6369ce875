package launch

import "golang.org/x/sys/unix"

// isForeground reports whether this process's group is the foreground
// job of the terminal fd: only then does the kernel send the terminal's
// signals (Ctrl-C, Ctrl-\) to the whole group, the child included.
func isForeground(fd uintptr) bool {
	pg, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
	return err == nil && pg == unix.Getpgrp()
}
