//go:build linux || darwin

package launch

import (
	"os"
	"syscall"
)

// inodeOf returns fi's inode, device and change time (ns).
func inodeOf(fi os.FileInfo) (inode, dev uint64, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0
	}
	return uint64(st.Ino), uint64(st.Dev), ctimeOf(st)
}
