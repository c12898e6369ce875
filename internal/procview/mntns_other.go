//go:build !linux

package procview

// SameMountNamespace reports whether process pid sees the files this
// process sees. Only Linux has mount namespaces; elsewhere (macOS) every
// process of the machine sees the same files, and a container runs in a
// virtual machine whose processes are not in this table.
func SameMountNamespace(pid int) (bool, error) { return true, nil }
