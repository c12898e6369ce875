package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// The process checks find, on this machine and for this user, MCP
// processes left over by an OpenCode that is gone (proven by the record
// the daemons keep, by the process group or by OPENCODE_PID: see
// procview's Orphans; without proof they are only "possibly left over"
// and never reaped) and servers that run twice under one live OpenCode. They need neither a daemon nor
// OpenCode: the case that matters most is an OpenCode that was killed,
// whose stdio child lives on. So the configured local servers are read
// from the config files OpenCode reads (opencode.OwnedMCPConfig), never
// asked of OpenCode, in every directory where one may have been started:
//
//   - each --directory, each directory a running daemon has armed, and
//     each directory of a server the record saw;
//   - the working directory of every process of this user that looks
//     left over (procview.LeftOverDirs: OpenCode starts a local server
//     with the directory as its cwd, so an orphan names its own
//     directory);
//   - the working directory of each live OpenCode and of its children
//     (the same reason, for duplicates).
//
// A server configured with a cwd of its own is found there only through
// the first two: its process's cwd is not its directory.

// ReapFix is the command that ends orphans.
const ReapFix = "mcp-reconnect doctor --reap"

// Found is what FindProcesses saw: the orphans Reap may end, and the
// duplicates it lists.
type Found struct {
	// Orphans are this user's processes running the command of a
	// configured local server whose parent is init, a subreaper or an
	// OpenCode that is not watched, each with its evidence: only the
	// proven ones are reaped.
	Orphans []procview.Orphan
	// Duplicates are servers with more live children than one under a
	// live OpenCode of this user.
	Duplicates []Duplicate
	// OpenCodes are the pids of this user's live OpenCode processes.
	OpenCodes []int

	table procview.Table
	scope procview.Scope
}

// Duplicate is one server of one directory that runs more than once
// under one OpenCode.
type Duplicate struct {
	// OpenCode is the OpenCode process the children belong to (the npm
	// package's node wrapper when OpenCode runs through it).
	OpenCode int
	procview.Duplicate
}

// localServers is what FindProcesses needs of a directory's config.
func (o Options) localServers(dir string) map[string]opencode.MCPEntry {
	if o.localConfig != nil {
		return o.localConfig(dir)
	}
	// Only files this user owns name what runs in a directory: doctor
	// --reap acts on it, and another user may write /tmp/opencode.json.
	return opencode.OwnedMCPConfig(dir, o.UID)
}

// dirSet keeps directories in the order first seen, once each.
type dirSet struct {
	list []string
	seen map[string]bool
}

func (d *dirSet) add(dirs ...string) {
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	for _, dir := range dirs {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if dir = filepath.Clean(dir); !d.seen[dir] {
			d.seen[dir] = true
			d.list = append(d.list, dir)
		}
	}
}

// FindProcesses lists the orphaned and duplicate MCP processes of o.UID
// in o.ProcessTable, with the checks that report them: nil when
// o.ProcessTable is nil.
func FindProcesses(ctx context.Context, o Options) (Found, []Check) {
	if o.ProcessTable == nil {
		return Found{}, nil
	}
	t, err := o.ProcessTable()
	if err != nil {
		return Found{}, []Check{{Info, "processes", "not checked: " + err.Error()}}
	}
	all, err := t.List()
	if err != nil {
		return Found{}, []Check{{Warn, "processes", "cannot read the process table: " + err.Error()}}
	}
	var dirs dirSet
	dirs.add(o.Directories...)
	dirs.add(armedDirectories(ctx, o)...)
	var record []procview.Sightings
	if o.Record != nil {
		if all, err := o.Record.Load(); err == nil {
			record = o.Record.Prune(t, all)
		}
	}
	for _, r := range record {
		for _, x := range r.Seen {
			dirs.add(x.Directory)
		}
	}
	// Only the processes whose name may be OpenCode's (the native
	// binary, or the npm package's node or bun wrapper around it) are
	// read whole (argv, cwd, owner) here.
	f := Found{table: t, scope: procview.Scope{UID: o.UID, Record: record}}
	var openCodes []procview.Process
	for _, p := range all {
		if p.Zombie || !procview.MayBeOpenCode(p.Comm) {
			continue
		}
		full, err := t.Read(p.PID)
		if err == nil && full.Same(p) && !full.Zombie && full.UID == o.UID && procview.IsOpenCode(full) {
			openCodes = append(openCodes, full)
			f.OpenCodes = append(f.OpenCodes, full.PID)
		}
	}
	// Every live OpenCode of this user is watched: its children are its
	// servers, never orphans, whichever daemon (if any) follows it.
	f.scope.Watched = slices.Clone(f.OpenCodes)
	// The processes that look left over name their own directories.
	left, _ := procview.LeftOverDirs(t, f.scope)
	dirs.add(left...)
	for _, oc := range openCodes {
		dirs.add(oc.Cwd)
		kids, _ := t.Children(oc.PID)
		for _, c := range kids {
			if p, err := t.Read(c); err == nil && p.UID == o.UID {
				dirs.add(p.Cwd)
			}
		}
	}

	var servers []procview.LocalServer
	for _, dir := range dirs.list {
		cfg := o.localServers(dir)
		// A disabled server counts too: a config reload that disabled
		// it is one way its process is left behind.
		for _, name := range opencode.Names(cfg) {
			e := cfg[name]
			if e.Type == "remote" || len(e.Command) == 0 {
				continue
			}
			servers = append(servers, procview.LocalServer{Directory: dir, Name: name, Command: e.Command, Cwd: e.Cwd})
		}
	}

	var checks []Check
	f.Orphans, err = procview.Orphans(t, servers, f.scope)
	if err != nil {
		checks = append(checks, Check{Warn, "processes", "cannot look for orphaned MCP processes: " + err.Error()})
	}
	for _, oc := range openCodes {
		// The native binary under the npm package's wrapper is followed
		// by the wrapper's view.
		if slices.Contains(f.OpenCodes, oc.PPID) {
			continue
		}
		v, err := procview.NewView(t, oc.PID)
		if err != nil {
			continue // it exited since
		}
		v.SetServers(servers)
		s, err := v.Scan()
		if err != nil || s.Gone {
			continue
		}
		for _, d := range s.Duplicates() {
			f.Duplicates = append(f.Duplicates, Duplicate{OpenCode: oc.PID, Duplicate: d})
		}
	}
	return f, append(checks, f.checks(len(servers), len(dirs.list))...)
}

// armedDirectories are the directories the running daemons have armed;
// a daemon that does not answer adds none (serverChecks says so).
func armedDirectories(ctx context.Context, o Options) []string {
	var out []string
	for _, d := range o.daemons() {
		st, err := d.Status(ctx)
		if err != nil {
			continue
		}
		for _, s := range st.Servers {
			for _, dir := range s.Directories {
				out = append(out, dir.Directory)
			}
		}
	}
	return out
}

// checks reports what was found.
func (f Found) checks(servers, dirs int) []Check {
	if len(f.Orphans) == 0 && len(f.Duplicates) == 0 {
		return []Check{{OK, "processes", fmt.Sprintf("no orphaned or duplicate MCP process (%d OpenCode %s of this user; %d local %s configured in the %d %s looked at)",
			len(f.OpenCodes), plural(len(f.OpenCodes), "process", "processes"), servers, plural(servers, "server", "servers"), dirs, plural(dirs, "directory", "directories"))}}
	}
	var checks []Check
	proven := 0
	for _, o := range f.Orphans {
		name := fmt.Sprintf("orphan pid %d", o.PID)
		detail := fmt.Sprintf("%s (cwd %s; parent %d %s: %s; runs the command of %s): %s", o.Command, o.Cwd, o.PPID, o.ParentComm, o.Parentage, keyList(o.Servers), o.Why)
		if o.Evidence.Proven() {
			proven++
		} else {
			name = fmt.Sprintf("possibly left over pid %d", o.PID)
			detail += "; not proven an orphan, so never reaped: end it yourself if it is one"
		}
		checks = append(checks, Check{Warn, name, detail})
	}
	if proven > 0 {
		checks = append(checks, Check{Warn, "orphans", fmt.Sprintf("%d orphaned MCP %s: end %s with %s (it asks before each one)",
			proven, plural(proven, "process", "processes"), plural(proven, "it", "them"), ReapFix)})
	}
	for _, d := range f.Duplicates {
		older := make([]string, 0, len(d.Children)-1)
		for _, c := range d.Children[:len(d.Children)-1] {
			older = append(older, strconv.Itoa(c.PID))
		}
		newest := d.Children[len(d.Children)-1]
		detail := fmt.Sprintf("%d processes of one server under OpenCode pid %d: pids %s and %d, the %s; restart OpenCode, or end the %s with kill %s; command %s",
			len(d.Children), d.OpenCode, strings.Join(older, ", "), newest.PID, plural(len(older), "newer", "newest"),
			plural(len(older), "older", "older ones"), strings.Join(older, " "), newest.Command())
		checks = append(checks, Check{Warn, keyList(d.Keys), detail})
	}
	return checks
}

// keyList names servers "directory: name", at most three.
func keyList(keys []procview.Key) string {
	var names []string
	for i, k := range keys {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(keys)-3))
			break
		}
		names = append(names, k.Directory+": "+k.Name)
	}
	return strings.Join(names, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
