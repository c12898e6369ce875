package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
)

var versionRE = regexp.MustCompile(`(\d+)\.\d+\.\d+(?:-v(\d+)[0-9A-Za-z.-]*)?`)

// askVersion runs `command --version` and returns what it prints. It
// takes OpenCode 1.2–1.4 s (a JavaScript runtime starting): Versions
// remembers the answer so that `run` pays it once per binary.
func askVersion(ctx context.Context, command string, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, command, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", command, err)
	}
	return string(out), nil
}

// ParseMajor finds the first x.y.z version in out and returns the
// OpenCode line it names (opencode.Major: a build from source of the v2
// line, 0.0.0-v2src-…, is 2).
func ParseMajor(out string) (int, error) {
	v := versionRE.FindString(out)
	if v == "" {
		return 0, fmt.Errorf("no version in %q", truncate(out, 80))
	}
	return opencode.Major(v), nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Versions remembers the major version each OpenCode binary reports, so
// that telling the generation (a 2.x TUI attaches to a shared background
// service instead of serving itself; the two are wrapped differently)
// costs a stat and a small file read instead of a `--version` run.
//
// An answer is remembered for the file the command resolves to (symlinks
// followed: `~/.opencode/bin/opencode` may point into a versioned
// directory) and holds only while that file is the same one: same size,
// modification time, inode and device, and change time. The change time
// cannot be set from user space, so a binary replaced in place (an
// installer that copies over it, or preserves the old mtime as npm does
// when it extracts a package) is asked again. An npm shim (a small script
// that starts the platform package's binary) may stay byte-identical
// across an upgrade: for a file inside a node_modules tree, the tree's
// hidden lockfile (node_modules/.package-lock.json, rewritten by every
// npm install) is part of what must be unchanged.
type Versions struct {
	// File is the cache file (created 0600 in a 0700 directory); ""
	// remembers nothing.
	File string
	// Ask runs `command --version` (askVersion).
	Ask func(ctx context.Context, command string, env []string) (string, error)
}

// DefaultVersions keeps its cache in the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS).
func DefaultVersions() *Versions {
	v := &Versions{Ask: askVersion}
	if dir, err := os.UserCacheDir(); err == nil {
		v.File = filepath.Join(dir, "mcp-reconnect", "opencode-versions.json")
	}
	return v
}

// maxVersionEntries bounds the cache: the newest answers are kept.
const maxVersionEntries = 32

// maxVersionsFile bounds what is read of the cache file.
const maxVersionsFile = 256 << 10

// versionEntry is one remembered answer: the major version of the file
// at Path while it is the one ID describes (identify).
type versionEntry struct {
	Path  string `json:"path"`
	ID    string `json:"id"`
	Major int    `json:"major"`
}

// Major returns the major version `command --version` reports (1 for
// OpenCode 1.18.34, 2 for 2.1.2), from the cache when the binary is the
// one it was asked of (cached). A script outside an npm tree (see
// identify) is asked every time. A missing, unreadable or foreign cache
// file (not a private file of this user's) remembers nothing.
func (v *Versions) Major(ctx context.Context, command string, env []string) (major int, cached bool, err error) {
	path, err := exec.LookPath(command)
	if err != nil {
		return 0, false, err
	}
	resolved, id, idErr := identify(path)
	cacheable := idErr == nil && v.File != ""
	var entries []versionEntry
	if cacheable {
		if b, err := private.ReadFile(v.File, maxVersionsFile); err != nil || json.Unmarshal(b, &entries) != nil {
			entries = nil
		}
		for _, e := range entries {
			if e.Path == resolved && e.ID == id && e.Major != 0 {
				return e.Major, true, nil
			}
		}
	}
	out, err := v.Ask(ctx, path, env)
	if err != nil {
		return 0, false, err
	}
	if major, err = ParseMajor(out); err != nil {
		return 0, false, fmt.Errorf("%s --version: %w", command, err)
	}
	if cacheable {
		// Newest first, replacing the entry of the same path; written
		// atomically.
		entries = slices.DeleteFunc(entries, func(o versionEntry) bool { return o.Path == resolved })
		entries = append([]versionEntry{{Path: resolved, ID: id, Major: major}}, entries[:min(len(entries), maxVersionEntries-1)]...)
		dir := filepath.Dir(v.File)
		if b, err := json.MarshalIndent(entries, "", "  "); err == nil && private.EnsureDir(dir) == nil {
			_ = private.WriteFile(dir, filepath.Base(v.File), b)
		}
	}
	return major, false, nil
}

// identify returns the file path resolves to and what identifies its
// content: what stat(2) says of it, and of the lockfile of the
// node_modules tree it lives in, if any.
func identify(path string) (resolved, id string, err error) {
	if resolved, err = filepath.EvalSymlinks(path); err == nil {
		resolved, err = filepath.Abs(resolved)
	}
	if err == nil {
		id, err = statID(resolved)
	}
	if err != nil {
		return "", "", err
	}
	nodeModules := string(filepath.Separator) + "node_modules"
	if i := strings.LastIndex(resolved, nodeModules+string(filepath.Separator)); i >= 0 {
		// The innermost node_modules tree the file is in (resolved is clean).
		if lock, err := statID(filepath.Join(resolved[:i+len(nodeModules)], ".package-lock.json")); err == nil {
			id += "; npm lock " + lock
		}
	} else if isScript(resolved) {
		// A script outside an npm tree may answer differently in every
		// directory: a version manager's shim (asdf, mise, proto pick the
		// version per project) or a wrapper of the user's own. Only the
		// file itself is no key for its answer: ask every time.
		return "", "", errors.New("a script outside an npm tree: its version is asked every time")
	}
	return resolved, id, nil
}

// isScript reports whether the file starts with "#!".
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [2]byte
	n, _ := io.ReadFull(f, head[:])
	return n == 2 && head == [2]byte{'#', '!'}
}

// statID is what stat(2) says of path: size, modification and change
// times, inode and device (x/sys/unix names the times alike on every
// system).
func statID(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fmt.Sprintf("size %d mtime %d ctime %d inode %d dev %d", st.Size, st.Mtim.Nano(), st.Ctim.Nano(), st.Ino, st.Dev), nil
}

// Exec replaces this process with args[0] (found on PATH): the wrapper
// gets out of the way, and the command's exit code, signals and terminal
// are its own. It returns only when the command cannot be started.
func Exec(args, env []string) error {
	path, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, args, env)
}
