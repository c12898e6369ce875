package procview

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// SameMountNamespace reports whether process pid sees the files this
// process sees: whether both are in one mount namespace. An OpenCode in
// a container whose port is published on loopback looks local, but its
// opencode.json, its HOME and its /etc/opencode are the container's:
// applying this machine's files to it would invent its config. An error
// (another user's process, which the kernel does not let us inspect; a
// process gone) means the question has no answer: treat the config as
// unknown, never as this machine's.
func SameMountNamespace(pid int) (bool, error) { return sameMountNamespace("/proc", pid) }

// sameMountNamespace compares the namespace links of pid and of this
// process under the /proc tree root: the kernel names a namespace
// "mnt:[INODE]", one inode per namespace.
func sameMountNamespace(root string, pid int) (bool, error) {
	self, err := os.Readlink(filepath.Join(root, "self", "ns", "mnt"))
	if err != nil {
		return false, fmt.Errorf("procview: own mount namespace: %w", err)
	}
	other, err := os.Readlink(filepath.Join(root, strconv.Itoa(pid), "ns", "mnt"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("procview: pid %d mount namespace: %w", pid, ErrGone)
	}
	if err != nil {
		return false, fmt.Errorf("procview: pid %d mount namespace: %w", pid, err)
	}
	return self == other, nil
}
