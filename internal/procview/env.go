package procview

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// maxEnviron bounds what is read of /proc/PID/environ: the kernel limits
// the environment and arguments together to about 2 MiB.
const maxEnviron = 4 << 20

// Env implements Table through /proc/PID/environ, reading one
// NUL-terminated entry at a time and keeping only the one asked for.
func (t *procTable) Env(pid int, name string) (string, bool, error) {
	f, err := os.Open(filepath.Join(t.root, strconv.Itoa(pid), "environ"))
	t.reads.Add(1)
	if err != nil {
		return "", false, gone(pid, err)
	}
	defer f.Close()
	v, ok, err := findEnv(io.LimitReader(f, maxEnviron), name)
	if err != nil {
		return "", false, fmt.Errorf("procview: pid %d environ: %w", pid, err)
	}
	return v, ok, nil
}

// findEnv scans NUL-terminated NAME=VALUE entries for name; the last one
// wins, as for getenv on a duplicated name.
func findEnv(r io.Reader, name string) (string, bool, error) {
	br := bufio.NewReaderSize(r, 4096)
	prefix := []byte(name + "=")
	var val string
	found := false
	for {
		entry, err := br.ReadSlice(0)
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long entry: not ours unless it starts with the name.
			var whole []byte // nil unless it is the one asked
			if bytes.HasPrefix(entry, prefix) {
				whole = bytes.Clone(entry)
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				entry, err = br.ReadSlice(0)
				if whole != nil && len(whole) < 64<<10 {
					whole = append(whole, entry...)
				}
			}
			entry = whole
		}
		if v, ok := bytes.CutPrefix(bytes.TrimSuffix(entry, []byte{0}), prefix); ok && entry != nil {
			val, found = string(v), true
		}
		if errors.Is(err, io.EOF) {
			return val, found, nil
		}
		if err != nil {
			return "", false, err
		}
	}
}
