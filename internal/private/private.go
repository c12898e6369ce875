// Package private keeps this user's own files: the state mcp-reconnect
// writes for itself (the registry of running daemons, the record of the
// MCP processes it saw) in directories only the user can enter, files
// only the user can read, written whole or not at all, and read back
// only when nobody else could have written them.
package private

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// StateDir is $XDG_STATE_HOME/mcp-reconnect/sub, or
// ~/.local/state/mcp-reconnect/sub when XDG_STATE_HOME is unset or not
// absolute.
func StateDir(sub string) (string, error) {
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" || !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("mcp-reconnect's state directory: %w (set XDG_STATE_HOME or HOME)", err)
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "mcp-reconnect", sub), nil
}

// Mine reports whether fi is this user's: owned by the process's user (on
// systems without owners, always).
func Mine(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Getuid()
}

// EnsureDir creates dir 0700 (and its parents), or brings an existing
// one of this user's to 0700; it refuses anything else at that path (a
// file, a symbolic link, another user's directory).
func EnsureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	if !Mine(fi) {
		return fmt.Errorf("%s belongs to another user; remove it", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// WriteFile writes b to dir/name as a 0600 file, atomically (Replace).
// dir must exist (EnsureDir).
func WriteFile(dir, name string, b []byte) error {
	return Replace(filepath.Join(dir, name), b, 0o600)
}

// Replace writes b to path as a file of mode perm, atomically: a reader
// sees the old file or the new one, never half of one. Its directory
// must exist.
func Replace(path string, b []byte, perm fs.FileMode) error {
	// CreateTemp makes the file 0600 before anything is written to it.
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
	}
	return werr
}

// ErrNotPrivate is a file another user owns or could have written or
// read, or that is not a regular file.
var ErrNotPrivate = errors.New("not a private file of this user")

// ReadFile reads a regular file of this user's that nobody else can read
// or write (Own.Open, not through a symbolic link), of at most limit
// bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, _, err := Own.open("file", path, syscall.O_NOFOLLOW)
	if err != nil {
		if !errors.As(err, new(*fs.PathError)) { // not the open's own error
			err = fmt.Errorf("%w: %w", err, ErrNotPrivate)
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}

// Trust says which files a reader trusts: whose, and whether others may
// read them. Every check of "a file of this user's that nobody else
// could have written" (the config file, a password file, the service's
// environment file, the config files a decision to end processes rests
// on, this package's own) is one Trust.
type Trust struct {
	// UID is the owner that counts; -1 (or Trust's zero value through
	// Mine) means this process's user.
	UID int
	// RootMayOwn: a file root owns is trusted too (a file in /etc; root
	// can do anything to this user anyway).
	RootMayOwn bool
	// Readable: others may read it (it holds no secret). Without it a
	// file the group or others can read is refused too.
	Readable bool
}

// Errors of Trust.Check, which its messages wrap.
var (
	// ErrForeign: another user owns the file.
	ErrForeign = errors.New("belongs to another user")
	// ErrWritable: the group or others can change it.
	ErrWritable = errors.New("other users can change it")
	// ErrReadable: the group or others can read it, and it may hold a
	// secret.
	ErrReadable = errors.New("other users can read it")
)

// Check says why what (a name for people: "config file") at path, as fi
// describes it, is not to be trusted, with the fix; nil when it is.
func (t Trust) Check(what, path string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid := t.UID
		if uid < 0 {
			uid = os.Getuid()
		}
		if owner := int(st.Uid); owner != uid && (owner != 0 || !t.RootMayOwn) {
			return fmt.Errorf("%s %s %w (uid %d), who can change it at any time; use a file of your own (copy it, then chmod 600)", what, path, ErrForeign, owner)
		}
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return fmt.Errorf("%s %s: %w (mode %04o); run: chmod 600 %s", what, path, ErrWritable, perm, path)
	}
	if !t.Readable && perm&0o044 != 0 {
		return fmt.Errorf("%s %s: %w (mode %04o), and it may hold a secret; run: chmod 600 %s", what, path, ErrReadable, perm, path)
	}
	return nil
}

// Open opens what (a name for people: "password file") at path for
// reading, if it is a regular file t trusts. It is checked through the
// open file, not a stat of the path and a read of it, between which the
// file could be swapped, and opened without blocking (a FIFO would block
// for ever). Errors name what and path, and wrap the open's (a missing
// file matches fs.ErrNotExist).
func (t Trust) Open(what, path string) (*os.File, fs.FileInfo, error) {
	return t.open(what, path, 0)
}

// open is Open with further flags for the open.
func (t Trust) open(what, path string, flag int) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flag, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("%s %s: %w", what, path, err)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s %s is not a regular file", what, path)
	default:
		err = t.Check(what, path, fi)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Own is the trust of this package's own files: this user's, private.
var Own = Trust{UID: -1}
