package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
)

var versionRE = regexp.MustCompile(`(\d+)\.\d+\.\d+(?:-v(\d+)[0-9A-Za-z.-]*)?`)

// AskVersion runs `command --version` and returns what it prints. It
// takes OpenCode 1.2–1.4 s (a JavaScript runtime starting): Versions
// remembers the answer so that `run` pays it once per binary.
func AskVersion(ctx context.Context, command string, env []string) (string, error) {
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
//
// The binary's grammar (its subcommands and value flags, from --help) is
// remembered the same way, under the same key, when it is asked for
// (Facts).
type Versions struct {
	// File is the cache file (created 0600 in a 0700 directory); ""
	// remembers nothing.
	File string
	// Ask runs `command --version` (default AskVersion).
	Ask func(ctx context.Context, command string, env []string) (string, error)
	// Help runs `command --help` (default AskHelp).
	Help func(ctx context.Context, command string, env []string) (string, error)

	mu sync.Mutex // one read-modify-write of File at a time
}

// DefaultVersions keeps its cache in the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS).
func DefaultVersions() *Versions {
	dir, err := os.UserCacheDir()
	if err != nil {
		return &Versions{}
	}
	return &Versions{File: filepath.Join(dir, "mcp-reconnect", "opencode-versions.json")}
}

// maxVersionEntries bounds the cache: the newest answers are kept.
const maxVersionEntries = 32

// maxVersionsFile bounds what is read of the cache file.
const maxVersionsFile = 256 << 10

// fileID is what identifies one version of a file.
type fileID struct {
	Path  string `json:"path"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime_ns"`
	CTime int64  `json:"ctime_ns"`
	Inode uint64 `json:"inode"`
	Dev   uint64 `json:"dev"`
}

// binaryID identifies a binary: the file itself, and the lockfile of the
// node_modules tree it lives in, if any.
type binaryID struct {
	File fileID `json:"file"`
	Lock fileID `json:"npm_lock,omitzero"`
}

type versionEntry struct {
	ID      binaryID `json:"id"`
	Version string   `json:"version"`
	Major   int      `json:"major"`
	// Grammar is what the binary's --help says, once asked.
	Grammar *grammarEntry `json:"grammar,omitempty"`
}

type grammarEntry struct {
	Subcommands []string `json:"subcommands,omitempty"`
	ValueFlags  []string `json:"value_flags,omitempty"`
	// Unreadable says why --help gave no grammar (BuiltIn is used): a
	// binary that cannot tell is not asked again at every start.
	Unreadable string `json:"unreadable,omitempty"`
}

type versionsFile struct {
	Binaries []versionEntry `json:"binaries"`
}

// Facts are what the wrapper learns of an OpenCode binary.
type Facts struct {
	// Major is the major version `command --version` reports (1 for
	// OpenCode 1.18.34, 2 for 2.0.21); 0 with MajorErr when it could not
	// be told.
	Major    int
	MajorErr error
	// Grammar is the binary's own, when asked for and readable; else
	// BuiltIn (GrammarErr says why, when it was asked for).
	Grammar    Grammar
	GrammarErr error
	// Cached: nothing had to be asked of the binary.
	Cached bool
}

// Facts returns the binary's major version and, with grammar, its grammar
// (from `command --help`), each from the cache when the binary is the one
// it was asked of. What must be asked is asked at once, --version and
// --help side by side, so a first start pays one question's time, not
// two. A script outside an npm tree (see identify) is asked its version
// every time, but never its grammar: BuiltIn, so that its starts cost
// what they did.
func (v *Versions) Facts(ctx context.Context, command string, env []string, grammar bool) Facts {
	ask, help := v.Ask, v.Help
	if ask == nil {
		ask = AskVersion
	}
	if help == nil {
		help = AskHelp
	}
	f := Facts{Grammar: BuiltIn}
	path, err := exec.LookPath(command)
	if err != nil {
		f.MajorErr, f.GrammarErr = err, err
		return f
	}
	id, idErr := identify(path)
	cacheable := idErr == nil && v.File != ""
	var known versionEntry
	if cacheable {
		for _, e := range v.load().Binaries {
			if e.ID == id {
				known = e
				break
			}
		}
	}
	needVersion := known.Major == 0
	needHelp := grammar && known.Grammar == nil && idErr == nil
	f.Major = known.Major // 0 when it must be asked
	switch {
	case grammar && known.Grammar != nil && known.Grammar.Unreadable != "":
		f.GrammarErr = fmt.Errorf("%s --help (remembered): %s", command, known.Grammar.Unreadable)
	case grammar && known.Grammar != nil:
		f.Grammar = Grammar{Subcommands: setOf(known.Grammar.Subcommands), ValueFlags: setOf(known.Grammar.ValueFlags)}
	}
	f.Cached = !needVersion && !needHelp
	var wg sync.WaitGroup
	var versionOut, helpOut string
	var versionErr, helpErr error
	if needVersion {
		wg.Go(func() { versionOut, versionErr = ask(ctx, path, env) })
	}
	if needHelp {
		wg.Go(func() { helpOut, helpErr = help(ctx, path, env) })
	}
	wg.Wait()
	var learned []func(*versionEntry)
	if needVersion {
		major, err := 0, versionErr
		if err == nil {
			if major, err = ParseMajor(versionOut); err != nil {
				err = fmt.Errorf("%s --version: %w", command, err)
			}
		}
		f.Major, f.MajorErr = major, err
		if err == nil {
			version := versionRE.FindString(versionOut)
			learned = append(learned, func(e *versionEntry) { e.Version, e.Major = version, major })
		}
	}
	if needHelp {
		var parsed Grammar
		err := helpErr
		if err == nil {
			if parsed, err = ParseHelp(helpOut); err != nil {
				err = fmt.Errorf("%s --help: %w", command, err)
			}
		}
		switch {
		case err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded):
			// It answered, with no grammar: BuiltIn, for as long as this
			// binary is the same one.
			f.GrammarErr = err
			ge := &grammarEntry{Unreadable: err.Error()}
			learned = append(learned, func(e *versionEntry) { e.Grammar = ge })
		case err != nil:
			f.GrammarErr = err // out of time: asked again next time
		default:
			f.Grammar = parsed
			ge := &grammarEntry{Subcommands: sortedKeys(parsed.Subcommands), ValueFlags: sortedKeys(parsed.ValueFlags)}
			learned = append(learned, func(e *versionEntry) { e.Grammar = ge })
		}
	}
	if cacheable && len(learned) > 0 {
		_ = v.update(id, func(e *versionEntry) {
			for _, fn := range learned {
				fn(e)
			}
		})
	}
	return f
}

// identify describes the file path resolves to.
func identify(path string) (binaryID, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return binaryID{}, err
	}
	if resolved, err = filepath.Abs(resolved); err != nil {
		return binaryID{}, err
	}
	f, err := statID(resolved)
	if err != nil {
		return binaryID{}, err
	}
	id := binaryID{File: f}
	nodeModules := string(filepath.Separator) + "node_modules"
	if i := strings.LastIndex(resolved, nodeModules+string(filepath.Separator)); i >= 0 {
		// The innermost node_modules tree the file is in (resolved is clean).
		if lock, err := statID(filepath.Join(resolved[:i+len(nodeModules)], ".package-lock.json")); err == nil {
			id.Lock = lock
		}
	} else if isScript(resolved) {
		// A script outside an npm tree may answer differently in every
		// directory: a version manager's shim (asdf, mise, proto pick the
		// version per project) or a wrapper of the user's own. Only the
		// file itself is no key for its answer: ask every time.
		return binaryID{}, errNotCacheable
	}
	return id, nil
}

// errNotCacheable: the file's answer cannot be remembered (isScript).
var errNotCacheable = errors.New("a script outside an npm tree: its version is asked every time")

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

func statID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	id := fileID{Path: path, Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	id.Inode, id.Dev, id.CTime = inodeOf(fi)
	return id, nil
}

// load reads the cache; a missing, unreadable or foreign file (not a
// private file of this user's) is an empty cache.
func (v *Versions) load() versionsFile {
	var vf versionsFile
	b, err := private.ReadFile(v.File, maxVersionsFile)
	if err != nil || json.Unmarshal(b, &vf) != nil {
		return versionsFile{}
	}
	return vf
}

// update changes the cache's entry of binary id (a new one when it has
// none: an entry of the same path but another id is an older binary's,
// replaced) with fn, and stores it.
func (v *Versions) update(id binaryID, fn func(*versionEntry)) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := versionEntry{ID: id}
	for _, o := range v.load().Binaries {
		if o.ID == id {
			e = o
			break
		}
	}
	fn(&e)
	return v.store(e)
}

// store adds e to the cache (replacing the entry of the same path), newest
// first, and writes it atomically.
func (v *Versions) store(e versionEntry) error {
	vf := v.load()
	vf.Binaries = slices.DeleteFunc(vf.Binaries, func(o versionEntry) bool { return o.ID.File.Path == e.ID.File.Path })
	vf.Binaries = append([]versionEntry{e}, vf.Binaries[:min(len(vf.Binaries), maxVersionEntries-1)]...)
	b, err := json.MarshalIndent(vf, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(v.File)
	if err := private.EnsureDir(dir); err != nil {
		return err
	}
	return private.WriteFile(dir, filepath.Base(v.File), b)
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
