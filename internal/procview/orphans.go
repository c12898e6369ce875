package procview

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Parentage says why a process looks orphaned.
type Parentage int

const (
	// ReparentedToInit: its parent exited and pid 1 (init, launchd)
	// adopted it. Proof of an orphan.
	ReparentedToInit Parentage = iota + 1
	// ReparentedToSubreaper: its parent exited and a child subreaper
	// (systemd --user, or one the caller names) adopted it. Proof of an
	// orphan.
	ReparentedToSubreaper
	// ChildOfOtherOpenCode: its parent is an OpenCode process, but not
	// one the daemon watches. It may be that OpenCode's live server: it
	// is listed, never reaped.
	ChildOfOtherOpenCode
)

func (p Parentage) String() string {
	switch p {
	case ReparentedToInit:
		return "reparented to init"
	case ReparentedToSubreaper:
		return "reparented to a subreaper"
	case ChildOfOtherOpenCode:
		return "child of an OpenCode that is not watched"
	}
	return fmt.Sprintf("Parentage(%d)", int(p))
}

// Proves reports whether the parentage proves the process an orphan.
func (p Parentage) Proves() bool { return p == ReparentedToInit || p == ReparentedToSubreaper }

// Orphan is a process of this user that runs the command of a configured
// local server and looks orphaned.
type Orphan struct {
	// PID, Start and Birth identify it.
	PID   int
	Start time.Time
	Birth uint64
	// PPID is its parent now, and ParentComm that parent's name.
	PPID       int
	ParentComm string
	// UID is its owner.
	UID int
	// Cwd is its working directory.
	Cwd string
	// Command is its command line with secrets masked: safe to show.
	Command string
	// Parentage says why it looks orphaned; Parentage.Proves tells
	// whether Reap may end it.
	Parentage Parentage
	// Servers are the configured servers it runs the command of: those
	// started in its working directory if any, else every server with
	// that command.
	Servers []Key

	cmd *command // the raw argv, for the check before a signal
}

// Scope is who is asking, for Orphans and Reap.
type Scope struct {
	// UID is the user whose processes count (os.Getuid() for the
	// daemon's user); no other user's process is ever listed or reaped.
	UID int
	// Watched are the pids of the OpenCode processes the daemon
	// watches: their children are not orphans.
	Watched []int
	// Subreapers are processes besides pid 1 known to adopt orphans (a
	// daemon that made itself one, say). A parent named systemd is one
	// already (the user's service manager is a subreaper).
	Subreapers []int
}

// parentage classifies p's parent; 0 for a parent that is neither.
func (s Scope) parentage(p Process, parent Process, parentKnown bool, isOpenCode func(Process) bool) Parentage {
	switch {
	case slices.Contains(s.Watched, p.PPID):
		return 0 // pid 1 too: OpenCode as a container's first process
	case p.PPID == 1 && parentKnown && isOpenCode(parent):
		return ChildOfOtherOpenCode
	case p.PPID == 1:
		return ReparentedToInit
	case slices.Contains(s.Subreapers, p.PPID):
		return ReparentedToSubreaper
	case !parentKnown:
		return 0
	case parent.Comm == "systemd":
		return ReparentedToSubreaper
	case isOpenCode(parent):
		return ChildOfOtherOpenCode
	}
	return 0
}

// Orphans lists the processes of s.UID that run the command of one of
// servers and whose parent is init, a subreaper, or an OpenCode process
// that is not watched. Zombies are left out: they are already dead.
// It reads the whole process table: a few milliseconds per thousand
// processes, for status and doctor, not for every scan.
func Orphans(t Table, servers []Server, s Scope) ([]Orphan, error) {
	all, err := t.List()
	if err != nil {
		return nil, err
	}
	m := newMatcher(servers)
	byPID := make(map[int]Process, len(all))
	for _, p := range all {
		byPID[p.PID] = p
	}
	// The npm package's node wrapper runs the native binary as its
	// child: the binary's children belong to the watched OpenCode too.
	watched := slices.Clone(s.Watched)
	for _, p := range all {
		if slices.Contains(s.Watched, p.PPID) && p.Comm == "opencode" {
			watched = append(watched, p.PID)
		}
	}
	s.Watched = watched
	fullParent := map[int]Process{}
	isOpenCode := func(pp Process) bool {
		if pp.Comm == "opencode" {
			return true
		}
		full, ok := fullParent[pp.PID]
		if !ok {
			full, _ = t.Read(pp.PID)
			fullParent[pp.PID] = full
		}
		return full.Same(pp) && IsOpenCode(full)
	}
	var out []Orphan
	for _, p := range all {
		if p.Zombie || p.PID == 1 {
			continue
		}
		parent, ok := byPID[p.PPID]
		why := s.parentage(p, parent, ok, isOpenCode)
		if why == 0 {
			continue
		}
		full, err := t.Read(p.PID)
		if err != nil || !full.Same(p) || full.Zombie || full.UID != s.UID {
			continue
		}
		keys := m.serving(full)
		if len(keys) == 0 {
			keys = m.runs(full)
		}
		if len(keys) == 0 {
			continue
		}
		out = append(out, Orphan{PID: full.PID, Start: full.Start, Birth: full.Birth, PPID: full.PPID,
			ParentComm: parent.Comm, UID: full.UID, Cwd: full.Cwd, Command: Display(full.Argv),
			Parentage: why, Servers: keys, cmd: newCommand(full.Argv)})
	}
	slices.SortFunc(out, func(a, b Orphan) int { return a.PID - b.PID })
	return out, nil
}

// Errors of Reap.
var (
	// ErrNotOrphan: the process no longer is (or never was) provably an
	// orphan of this user: another user's, a new process with the same
	// pid, adopted by a parent that proves nothing, or running another
	// command.
	ErrNotOrphan = errors.New("not provably an orphan")
	// ErrDeclined: the confirm callback said no.
	ErrDeclined = errors.New("declined")
)

// check verifies, right before a signal, that pid still is the orphan o
// listed: the same process (pid and start time), this user's, alive, its
// parentage still a proof, and the same command line.
func (s Scope) check(t Table, o Orphan) error {
	p, err := t.Read(o.PID)
	if err != nil {
		return err
	}
	if !p.Same(Process{PID: o.PID, Birth: o.Birth}) {
		return fmt.Errorf("procview: pid %d is another process now: %w", o.PID, ErrNotOrphan)
	}
	if p.Zombie {
		return fmt.Errorf("procview: pid %d has exited: %w", o.PID, ErrGone)
	}
	if p.UID != s.UID || o.UID != s.UID {
		return fmt.Errorf("procview: pid %d belongs to uid %d: %w", o.PID, p.UID, ErrNotOrphan)
	}
	var parent Process
	parentKnown := false
	if p.PPID != 1 && !slices.Contains(s.Subreapers, p.PPID) {
		parent, err = t.Stat(p.PPID)
		parentKnown = err == nil
	}
	if why := s.parentage(p, parent, parentKnown, func(Process) bool { return false }); !why.Proves() {
		return fmt.Errorf("procview: pid %d has parent %d: %w", o.PID, p.PPID, ErrNotOrphan)
	}
	if o.cmd == nil || !slices.Equal(p.Argv, o.cmd.argv) {
		return fmt.Errorf("procview: pid %d runs another command now: %w", o.PID, ErrNotOrphan)
	}
	return nil
}
