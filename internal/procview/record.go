package procview

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
)

// The record is what proves, after OpenCode is gone, that a process was
// its MCP server: the daemon writes down each MCP process it sees under a
// live OpenCode (pid, start time, process group, which server), and
// doctor --reap reads it, with or without a daemon still running. A
// process whose parent died is adopted by init like every daemon on the
// machine, so its parent proves nothing; that this very process (same pid,
// same start) served a server under an OpenCode that is now gone does.

// Ident is one process as the kernel tells it apart from every other:
// pid, start (Birth, the kernel's own unit) and its process group.
type Ident struct {
	PID   int       `json:"pid"`
	Birth uint64    `json:"birth"`
	Start time.Time `json:"start"`
	PGID  int       `json:"pgid"`
}

// IdentOf is p's identity.
func IdentOf(p Process) Ident { return Ident{PID: p.PID, Birth: p.Birth, Start: p.Start, PGID: p.PGID} }

// is reports whether p is the process id names: the same pid and birth
// (the kernel's start ticks, exact). Both start over at each boot, so an
// identity is only ever compared with a process of the boot it was read
// on (Sightings.Boot).
func (id Ident) is(p Process) bool {
	return p.PID == id.PID && p.Birth == id.Birth
}

// Alive reports whether the process id names still runs (a zombie has
// exited).
func (id Ident) Alive(t Table) bool {
	p, err := t.Stat(id.PID)
	return err == nil && id.is(p) && !p.Zombie
}

// Sighting is one MCP process seen serving a server under a live OpenCode.
type Sighting struct {
	Ident
	// Parent is the OpenCode process it was seen under (the native
	// binary under the npm package's wrapper, when OpenCode runs so).
	Parent Ident `json:"parent"`
	// Directory and Server name the server it served; both "" for a
	// child of OpenCode that served no server an armed directory names.
	Directory string `json:"directory"`
	Server    string `json:"server"`
}

// what says what x was seen doing, for a reason shown to the user.
func (x Sighting) what() string {
	if x.Server == "" {
		return "as a child"
	}
	return "serving " + x.Server
}

// Sightings are the MCP processes seen under one watched OpenCode.
type Sightings struct {
	// OpenCode is the watched process.
	OpenCode Ident `json:"opencode"`
	// Leader leads OpenCode's process group, when that is OpenCode
	// itself or the mcp-reconnect run wrapper that started it (whose
	// group holds nothing else): then every process of that group that
	// started after OpenCode is OpenCode's. Zero when the group is
	// someone else's (a shell's job with other commands in it).
	Leader Ident `json:"leader,omitzero"`
	// Seen are its MCP processes: the children it started and the
	// processes below them that serve (an npx's node, a shell's server).
	Seen []Sighting `json:"seen"`
	// At is when they were last seen.
	At time.Time `json:"at"`
	// Boot is the boot they ran on (Table.BootID): births of another
	// boot say nothing of this one's processes.
	Boot string `json:"boot,omitempty"`
	// End is the table's clock (Table.Now) when the daemon saw OpenCode
	// end (zero while it runs, or when no daemon saw it end): nothing
	// born at or after it is its.
	End uint64 `json:"end,omitempty"`
}

// Record is the directory of sightings: one file per watched OpenCode,
// private to the user.
type Record struct {
	// Dir holds one <pid>-<birth>.json per OpenCode process.
	Dir string
}

// DefaultRecord is the record in $XDG_STATE_HOME/mcp-reconnect/processes.
func DefaultRecord() (Record, error) {
	dir, err := private.StateDir("processes")
	if err != nil {
		return Record{}, fmt.Errorf("record of MCP processes: %w", err)
	}
	return Record{Dir: dir}, nil
}

func recordName(oc Ident) string {
	return strconv.Itoa(oc.PID) + "-" + strconv.FormatUint(oc.Birth, 10) + ".json"
}

// maxRecordFile bounds one file: 10,000 sightings are about 2 MiB.
const maxRecordFile = 8 << 20

// Save writes s as its OpenCode's file, replacing what was there.
func (r Record) Save(s Sightings) error {
	if err := private.EnsureDir(r.Dir); err != nil {
		return fmt.Errorf("record of MCP processes %s: %w", r.Dir, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := private.WriteFile(r.Dir, recordName(s.OpenCode), b); err != nil {
		return fmt.Errorf("record of MCP processes: %w", err)
	}
	return nil
}

// Load reads every file of the record; a file that is not private to
// this user, or not a record, is skipped. A missing directory is an empty
// record.
func (r Record) Load() ([]Sightings, error) {
	if r.Dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("record of MCP processes %s: %w", r.Dir, err)
	}
	if fi, err := os.Lstat(r.Dir); err != nil || !fi.IsDir() || !private.Mine(fi) || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("record of MCP processes %s: %w", r.Dir, private.ErrNotPrivate)
	}
	var out []Sightings
	for _, de := range ents {
		if !strings.HasSuffix(de.Name(), ".json") || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		b, err := private.ReadFile(filepath.Join(r.Dir, de.Name()), maxRecordFile)
		if err != nil {
			continue
		}
		var s Sightings
		if json.Unmarshal(b, &s) != nil || s.OpenCode.PID <= 0 || de.Name() != recordName(s.OpenCode) {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// Prune removes the files of OpenCode processes that are gone and that
// can prove nothing any more: every process seen under them is gone, and
// so is every process of the group they (or their run wrapper) led; or
// they ran on another boot.
func (r Record) Prune(t Table, all []Sightings) []Sightings {
	kept := all[:0:0]
	var groups map[int]bool // the process groups that have a live process
	for _, s := range all {
		if s.Boot != "" && s.Boot != t.BootID() {
			_ = os.Remove(filepath.Join(r.Dir, recordName(s.OpenCode)))
			continue
		}
		live := s.OpenCode.Alive(t) || slices.ContainsFunc(s.Seen, func(x Sighting) bool { return x.Alive(t) })
		if !live && (s.OpenCode.PGID == s.OpenCode.PID || s.Leader.PID != 0) {
			if groups == nil {
				groups = map[int]bool{}
				procs, err := t.List()
				if err != nil {
					return all // cannot tell: keep everything
				}
				for _, p := range procs {
					if !p.Zombie {
						groups[p.PGID] = true
					}
				}
			}
			live = groups[s.OpenCode.PGID]
		}
		if !live {
			_ = os.Remove(filepath.Join(r.Dir, recordName(s.OpenCode)))
			continue
		}
		kept = append(kept, s)
	}
	return kept
}
