package procview

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// An orphan is an MCP process that an OpenCode started and left behind
// when it died. Who its parent is now proves nothing: a process whose
// parent exits is adopted by init (or the nearest subreaper), like every
// daemon, user service, nohup or setsid job on the machine. What proves
// it is evidence that an OpenCode started it, and that this OpenCode is
// gone (docs/opencode.md#processes-the-mcp-children):
//
//   - the record: a daemon saw this very process (pid and start time)
//     serve a server under an OpenCode process, and that process is gone
//     (Record);
//   - the group: it is still in the process group that a recorded
//     OpenCode led (OpenCode's children inherit its group; a service,
//     setsid or nohup job leads its own or its starter's), and that
//     OpenCode is gone;
//   - the environment: OPENCODE_PID in it names OpenCode's pid (1.14 and
//     later put it in every child's environment), it is still in the
//     group that pid led, and no process runs with that pid any more (a
//     pid is not handed out again while a group of that id exists).
//
// Gone includes a zombie: an OpenCode that was killed and that its
// parent has not reaped yet is still in the table, in state Z, and runs
// nothing; its children were handed to init when it exited.
//
// A process that runs a configured server's command with none of these
// is at most "possibly left over": listed with why it is not proven,
// never signalled.

// Parentage says who adopted a process that looks left over, in words;
// "" for a parent that adopts nothing.
type Parentage string

const (
	// ReparentedToInit: its parent is pid 1 (init, launchd). Every
	// daemon's parent is: no proof by itself.
	ReparentedToInit Parentage = "reparented to init"
	// ReparentedToSubreaper: its parent is a child subreaper (systemd
	// --user, or one the caller names), or it was seen under an OpenCode
	// that is gone and has another parent now.
	ReparentedToSubreaper Parentage = "reparented to a subreaper"
	// ChildOfOtherOpenCode: its parent is an OpenCode process, but not
	// one the daemon watches. It may be that OpenCode's live server: it
	// is listed, never reaped.
	ChildOfOtherOpenCode Parentage = "child of an OpenCode that is not watched"
)

// Evidence says, in words, what proves that an OpenCode, now gone,
// started a process.
type Evidence string

const (
	// Unproven: nothing shows that an OpenCode started it.
	Unproven Evidence = "not proven"
	// SeenUnderOpenCode: the record holds this very process serving a
	// server under an OpenCode process that is gone.
	SeenUnderOpenCode Evidence = "seen under an OpenCode that is gone"
	// GroupOfGoneOpenCode: it is in the process group a recorded
	// OpenCode led (or the run wrapper that started it), and both are
	// gone.
	GroupOfGoneOpenCode Evidence = "in the process group of an OpenCode that is gone"
	// EnvOfGoneOpenCode: its OPENCODE_PID names the leader of its
	// process group, and no process has that pid any more.
	EnvOfGoneOpenCode Evidence = "started by an OpenCode that is gone (OPENCODE_PID)"
)

// Proven reports whether e proves an orphan (the zero Evidence does not).
func (e Evidence) Proven() bool { return e != Unproven && e != "" }

// Orphan is a process of this user that runs a configured local server
// (or was seen serving one) and looks left over by an OpenCode.
type Orphan struct {
	// PID and Birth identify it.
	PID   int
	Birth uint64
	// PPID is its parent now, and ParentComm that parent's name.
	PPID       int
	ParentComm string
	// Cwd is its working directory.
	Cwd string
	// Command is its command line with secrets masked: safe to show.
	Command string
	// Parentage says who adopted it.
	Parentage Parentage
	// Evidence says what proves it an orphan (Evidence.Proven), and Why
	// says it in words: the proof, or what is missing for one. Only a
	// proven orphan is ever signalled.
	Evidence Evidence
	Why      string
	// Servers are the configured servers it runs the command of: those
	// started in its working directory if any, else every server with
	// that command (or the one it was seen serving).
	Servers []Key
	// Below are the processes below it when it was listed (an npx's
	// shell and node, a shell's server): Reap ends them with it.
	Below []Ident

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
	// Record is what the daemons saw under live OpenCode processes
	// (Record.Load): the strongest evidence.
	Record []Sightings
}

// adoption classifies p's parent: who adopted it, or "" for a parent that
// adopts nothing (an ordinary live process) or a watched OpenCode.
func (s Scope) adoption(p Process, parent Process, parentKnown bool, isOpenCode func(Process) bool) Parentage {
	switch {
	case slices.Contains(s.Watched, p.PPID):
		return "" // pid 1 too: OpenCode as a container's first process
	case parentKnown && isOpenCode(parent):
		return ChildOfOtherOpenCode
	case p.PPID == 1:
		return ReparentedToInit
	case slices.Contains(s.Subreapers, p.PPID) || parent.PID == 1 || parentKnown && parent.Comm == "systemd":
		// The user's service manager is a child subreaper.
		return ReparentedToSubreaper
	}
	return ""
}

// sighting finds p in the record: the sighting of this very process, and
// the OpenCode it was seen under.
func (s Scope) sighting(t Table, p Process) (Sighting, bool) {
	for _, r := range s.Record {
		if r.Boot == "" || r.Boot != t.BootID() {
			continue // pids and births start over at each boot
		}
		if i := slices.IndexFunc(r.Seen, func(x Sighting) bool { return x.is(p) }); i >= 0 {
			return r.Seen[i], true
		}
	}
	return Sighting{}, false
}

// prove says what proves that p, a process of this user that looks left
// over, was started by an OpenCode that is gone: the evidence, and its
// words (or, unproven, what is missing).
func (s Scope) prove(t Table, p Process) (Evidence, string) {
	if x, ok := s.sighting(t, p); ok {
		if x.Parent.Alive(t) {
			return Unproven, fmt.Sprintf("seen %s under OpenCode pid %d, which still runs", x.what(), x.Parent.PID)
		}
		return SeenUnderOpenCode, fmt.Sprintf("seen %s under OpenCode pid %d (started %s), which is gone", x.what(), x.Parent.PID, x.Parent.Start.Format(time.DateTime))
	}
	for _, r := range s.Record {
		oc, leader := r.OpenCode, r.Leader
		if oc.PGID == oc.PID {
			leader = oc
		}
		if leader.PID != 0 && p.PGID == oc.PGID && leader.PID == oc.PGID && r.groupMember(t, p, leader) {
			return GroupOfGoneOpenCode, fmt.Sprintf("in the process group of OpenCode pid %d (started %s), which is gone", oc.PID, oc.Start.Format(time.DateTime))
		}
	}
	var missing []string
	if v, ok, err := t.Env(p.PID, "OPENCODE_PID"); ok && err == nil {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n <= 1:
			missing = append(missing, fmt.Sprintf("its OPENCODE_PID (%q) names no process", v))
		case p.PGID != n:
			missing = append(missing, fmt.Sprintf("its OPENCODE_PID names pid %d, but it left that process group (it is in group %d)", n, p.PGID))
		default:
			// p is in group n, so pid n cannot have been handed out
			// again: a process there is the OpenCode that made the
			// group, and a zombie (killed, its parent not waiting for
			// it yet) runs nothing.
			if oc, err := t.Stat(n); errors.Is(err, ErrGone) || err == nil && oc.Zombie {
				return EnvOfGoneOpenCode, fmt.Sprintf("started by OpenCode pid %d (its OPENCODE_PID and its process group), which is gone", n)
			}
			return Unproven, fmt.Sprintf("started by OpenCode pid %d (its OPENCODE_PID), which still runs", n)
		}
	} else {
		missing = append(missing, "its environment names no OpenCode")
	}
	if p.PGID == p.PID {
		missing = append(missing, "it leads its own process group (as a service, setsid or nohup job does; OpenCode's children are in OpenCode's)")
	} else {
		missing = append(missing, fmt.Sprintf("its process group %d is no recorded OpenCode's", p.PGID))
	}
	return Unproven, "nothing shows that an OpenCode started it: no daemon saw it under one, " + strings.Join(missing, ", ")
}

// groupMember reports whether p, in the process group r's OpenCode (or
// its run wrapper, leader) led, can only be one of that OpenCode's: the
// group's id is a pid, free again once the group is empty, and whatever
// gets it next and leads a group (a service, a setsid or nohup job) makes
// a new group with the same id. So p must not lead the group, no process
// may hold the group's id but the recorded leader as a zombie (killed,
// not yet reaped by its parent: a live leader is a new group's, since
// the recorded one is gone, and so is a zombie that is another process),
// and p must have started after that OpenCode did and,
// when its end is on record, before it ended. An OpenCode of another boot
// (the record outlives a reboot, and pids start over) proves nothing, nor
// one whose boot is not on record or the table cannot tell. Births and
// the end are on the table's one clock (Table.Now): no start time is set
// against a time read from another.
func (r Sightings) groupMember(t Table, p Process, leader Ident) bool {
	if r.Boot == "" || r.Boot != t.BootID() {
		return false
	}
	if p.PID == p.PGID || p.Birth < r.OpenCode.Birth || r.OpenCode.Alive(t) {
		return false
	}
	if r.End != 0 && p.Birth >= r.End {
		return false
	}
	g, err := t.Stat(p.PGID)
	return errors.Is(err, ErrGone) || err == nil && g.Zombie && leader.is(g)
}

// Orphans lists the processes of s.UID that look left over by an
// OpenCode: this user's, not a zombie nor pid 1, whose parent is init, a
// subreaper or an OpenCode process that is not watched, or that were seen
// under an OpenCode that is gone and have another parent now; and that
// run the command of one of the servers configured (or the record holds
// them); each with its evidence. servers names the configured local
// servers given the working directories of every process that looks left
// over, whatever it runs: OpenCode starts a local server with its
// directory as its cwd, so an orphan names its own directory, whose
// config says what the orphan may be. A process below another one listed
// is listed with it (Orphan.Below), not on its own. Zombies are left out:
// they are already dead. It reads the whole process table: a few
// milliseconds per thousand processes, for status and doctor, not for
// every scan.
func Orphans(t Table, servers func(cwds []string) []LocalServer, s Scope) ([]Orphan, error) {
	all, err := t.List()
	if err != nil {
		return nil, err
	}
	byPID := make(map[int]Process, len(all))
	kids := map[int][]int{}
	for _, p := range all {
		byPID[p.PID] = p
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	// The npm package's node wrapper runs the native binary as its
	// child: the binary's children belong to the watched OpenCode too.
	watched := slices.Clone(s.Watched)
	for _, p := range all {
		if slices.Contains(s.Watched, p.PPID) && openCodeName(p.Comm) {
			watched = append(watched, p.PID)
		}
	}
	s.Watched = watched
	fullParent := map[int]Process{}
	isOpenCode := func(pp Process) bool {
		if openCodeName(pp.Comm) {
			return true
		}
		full, ok := fullParent[pp.PID]
		if !ok {
			full, _ = t.Read(pp.PID)
			fullParent[pp.PID] = full
		}
		return full.Same(pp) && IsOpenCode(full)
	}
	type leftOver struct {
		full, parent Process
		why          Parentage
	}
	var left []leftOver
	var cwds []string
	for _, p := range all {
		if p.Zombie || p.PID == 1 || slices.Contains(s.Watched, p.PPID) {
			continue
		}
		parent, ok := byPID[p.PPID]
		why := s.adoption(p, parent, ok, isOpenCode)
		if seen, wasSeen := s.sighting(t, p); wasSeen && why == "" && !seen.Parent.Alive(t) {
			why = ReparentedToSubreaper // adopted by a parent we did not know to adopt
		}
		if why == "" {
			continue
		}
		full, err := t.Read(p.PID)
		if err != nil || !full.Same(p) || full.Zombie || full.UID != s.UID {
			continue
		}
		left = append(left, leftOver{full, parent, why})
		cwds = append(cwds, full.Cwd)
	}
	m := newMatcher(servers(cwds))
	var out []Orphan
	for _, l := range left {
		full := l.full
		keys := m.serving(full)
		if len(keys) == 0 {
			keys = m.runs(full)
		}
		if seen, wasSeen := s.sighting(t, full); len(keys) == 0 && wasSeen && seen.Server != "" {
			keys = []Key{{seen.Directory, seen.Server}}
		}
		if len(keys) == 0 {
			continue
		}
		ev, because := Unproven, "its OpenCode still runs"
		if l.why != ChildOfOtherOpenCode {
			ev, because = s.prove(t, full)
		}
		out = append(out, Orphan{PID: full.PID, Birth: full.Birth, PPID: full.PPID,
			ParentComm: l.parent.Comm, Cwd: full.Cwd, Command: Display(full.Argv), Parentage: l.why,
			Evidence: ev, Why: because, Servers: keys, Below: below(byPID, kids, full.PID), cmd: newCommand(full.Argv)})
	}
	// A process below another listed one goes with it.
	inside := map[int]bool{}
	for _, o := range out {
		for _, b := range o.Below {
			inside[b.PID] = true
		}
	}
	out = slices.DeleteFunc(out, func(o Orphan) bool { return inside[o.PID] })
	slices.SortFunc(out, func(a, b Orphan) int { return a.PID - b.PID })
	return out, nil
}

// maxBelow bounds the processes listed below one orphan.
const maxBelow = 64

// below lists the live processes under pid, breadth first.
func below(byPID map[int]Process, kids map[int][]int, pid int) []Ident {
	var out []Ident
	queue := slices.Clone(kids[pid])
	for len(queue) > 0 && len(out) < maxBelow {
		c := queue[0]
		queue = queue[1:]
		p := byPID[c]
		if p.Zombie {
			continue
		}
		out = append(out, IdentOf(p))
		queue = append(queue, kids[c]...)
	}
	return out
}

// Errors of Reap.
var (
	// ErrNotOrphan: the process no longer is (or never was) provably an
	// orphan of this user: another user's, a new process with the same
	// pid, its OpenCode back or no evidence left, or running another
	// command.
	ErrNotOrphan = errors.New("not provably an orphan")
	// ErrDeclined: the confirm callback said no.
	ErrDeclined = errors.New("declined")
)

// check verifies, right before a signal, that pid still is the orphan o
// listed: the same process (pid and start time), s's user's (mine), alive, not
// a watched OpenCode's child, the same command line, and still proven an
// orphan.
func (s Scope) check(t Table, o Orphan) error {
	p, err := s.mine(t, o.PID, Process{PID: o.PID, Birth: o.Birth}.Same)
	if err != nil {
		return err
	}
	parent, err := t.Read(p.PPID)
	switch s.adoption(p, parent, err == nil, IsOpenCode) {
	case ChildOfOtherOpenCode:
		return fmt.Errorf("procview: pid %d is a child of OpenCode pid %d: %w", o.PID, p.PPID, ErrNotOrphan)
	case "":
		// Its parent adopts nothing (or is the watched OpenCode): only a
		// process seen under an OpenCode that is gone may have such a
		// parent (one that made itself a subreaper).
		if x, ok := s.sighting(t, p); !ok || x.Parent.Alive(t) {
			return fmt.Errorf("procview: pid %d has parent %d: %w", o.PID, p.PPID, ErrNotOrphan)
		}
	}
	if o.cmd == nil || !slices.Equal(p.Argv, o.cmd.argv) {
		return fmt.Errorf("procview: pid %d runs another command now: %w", o.PID, ErrNotOrphan)
	}
	if ev, why := s.prove(t, p); !ev.Proven() {
		return fmt.Errorf("procview: pid %d: %s: %w", o.PID, why, ErrNotOrphan)
	}
	return nil
}

// mine reads pid again and returns it while is still says it is the
// process meant, alive and this user's: right before a signal, a process
// listed below a proven orphan must pass it (it was in the orphan's
// tree, and pid and start time name it alone).
func (s Scope) mine(t Table, pid int, is func(Process) bool) (Process, error) {
	p, err := t.Read(pid)
	if err != nil {
		return Process{}, err
	}
	if !is(p) {
		return Process{}, fmt.Errorf("procview: pid %d is another process now: %w", pid, ErrNotOrphan)
	}
	if p.Zombie {
		return Process{}, fmt.Errorf("procview: pid %d has exited: %w", pid, ErrGone)
	}
	if p.UID != s.UID {
		return Process{}, fmt.Errorf("procview: pid %d belongs to uid %d: %w", pid, p.UID, ErrNotOrphan)
	}
	return p, nil
}
