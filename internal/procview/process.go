package procview

import (
	"errors"
	"path/filepath"
	"time"
)

// ErrGone is returned for a process that no longer exists (it exited, or
// exited and was reaped, between the listing and the read).
var ErrGone = errors.New("process gone")

// Process is one entry of the process table. Fields a reader could not
// read (another user's process, a zombie) are left empty; the environment
// is never read.
type Process struct {
	// PID and PPID: the process and its parent.
	PID, PPID int
	// PGID is the process group.
	PGID int
	// UID is the real user id; -1 when unknown (Table.List does not read it).
	UID int
	// Zombie: the process has exited and waits for its parent to reap it.
	Zombie bool
	// Start is when the process started, by the wall clock, to show: on
	// Linux the boot time in whole seconds plus clock ticks (so up to a
	// second early), on macOS to the microsecond. Never order it against
	// a time the daemon read: compare Birth with Table.Now.
	Start time.Time
	// Birth identifies the process among all that ever had its pid since
	// boot: Linux clock ticks since boot, macOS microseconds since the
	// epoch. A pid with another Birth is another process.
	Birth uint64
	// Comm is the kernel's short name of the program (at most 15 bytes).
	Comm string
	// Cwd is the working directory; "" when it cannot be read.
	Cwd string
	// Argv is the command line as the process sees it; nil when it cannot
	// be read. It may hold secrets: show Redact(Argv) or Display(Argv).
	Argv []string
}

// Same reports whether p and o are one process (pid and birth agree).
func (p Process) Same(o Process) bool { return p.PID == o.PID && p.Birth == o.Birth }

// Table reads the process table of this machine (System) or of a recorded
// /proc tree (ProcFS).
type Table interface {
	// List lists every process with the cheap facts: PID, PPID, PGID,
	// Zombie, Start, Birth and Comm. UID is -1, Cwd and Argv are empty.
	List() ([]Process, error)
	// Stat reads the cheap facts of one process (as List does); ErrGone
	// when it does not exist.
	Stat(pid int) (Process, error)
	// Read reads every field of one process; ErrGone when it does not
	// exist.
	Read(pid int) (Process, error)
	// Children lists the pids of pid's children (those any of its threads
	// started); ErrGone when pid does not exist. The kernel's list is a
	// snapshot taken while the tree changes: a child can be missing from
	// it for a moment, so confirm an absence with Read.
	Children(pid int) ([]int, error)
	// Now reads the clock births count in: a process whose Birth is
	// below a reading started before it, and one that starts after it
	// has a Birth no smaller. That is how a moment (a connect, an end)
	// is set against a process: on one clock, exactly.
	Now() uint64
	// BootID identifies the boot births count from ("" when the table
	// cannot tell): a birth of another boot says nothing of this one's.
	BootID() string
	// Env returns the value of the variable name in pid's environment,
	// and whether it is set; a process of another user cannot be read.
	// The environment is otherwise never read: it holds the secrets of
	// whoever started the process (OpenCode hands its own environment,
	// its server password included, to every MCP child). One variable
	// matters, OPENCODE_PID, which OpenCode 1.14 and later put in every
	// child's environment (docs/opencode.md#processes-the-mcp-children):
	// the only trace of who started a process that outlives its parent.
	Env(pid int, name string) (string, bool, error)
}

// IsOpenCode reports whether p runs OpenCode: the native binary (argv[0]
// or the kernel's name "opencode", or "opencode2", the name OpenCode 2's
// install script and its build give it), or the npm package's node or bun
// wrapper around it.
func IsOpenCode(p Process) bool {
	if openCodeName(p.Comm) || len(p.Argv) > 0 && openCodeName(filepath.Base(p.Argv[0])) {
		return true
	}
	// The wrapper: node, nodejs or bun running opencode.
	return len(p.Argv) > 1 && MayBeOpenCode(filepath.Base(p.Argv[0])) && openCodeName(filepath.Base(p.Argv[1]))
}

func openCodeName(name string) bool { return name == "opencode" || name == "opencode2" }

// MayBeOpenCode reports whether a process of this kernel name (Comm) may
// run OpenCode, so that its argv is worth reading for IsOpenCode: the
// native binary's names, or an interpreter of the npm package's wrapper.
func MayBeOpenCode(comm string) bool {
	return comm == "node" || comm == "nodejs" || comm == "bun" || openCodeName(comm)
}
