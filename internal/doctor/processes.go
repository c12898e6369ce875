package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/tailscale/hujson"
)

// The process checks find, on this machine and for this user, MCP
// processes left over by an OpenCode that is gone (proven by the record
// the daemons keep, by the process group or by OPENCODE_PID: see
// procview's Orphans; without proof they are only "possibly left over"
// and never reaped) and servers that run twice under one live OpenCode.
// They need neither a daemon nor OpenCode: the case that matters most is
// an OpenCode that was killed, whose stdio child lives on. A process the
// record saw is known by what it served. Any other is matched on the
// commands of the local servers named in exactly DIR/opencode.json and
// DIR/opencode.jsonc, for each --directory and for the working directory
// of each process that looks left over (OpenCode starts a local server
// with its directory as its cwd, so an orphan names its own directory).
// doctor does not redo OpenCode's search for its config files (global,
// parent and .opencode directories, variables): a server configured
// anywhere else is found only through the record.

// ReapFix is the command that ends orphans.
const ReapFix = "mcp-reconnect doctor --reap"

// Found is what FindProcesses saw: the orphans Reap may end.
type Found struct {
	// Orphans are this user's processes running the command of a
	// configured local server whose parent is init, a subreaper or an
	// OpenCode that is not watched, each with its evidence: only the
	// proven ones are reaped.
	Orphans []procview.Orphan

	table procview.Table
	scope procview.Scope
}

// dirConfig reads the MCP servers named in dir/opencode.json and
// dir/opencode.jsonc (the latter wins a name both name), in either
// generation's shape. Only files uid (or root) owns and nobody else can
// change count: doctor --reap acts on them, and another user may write
// /tmp/opencode.json.
func dirConfig(dir string, uid int) map[string]opencode.MCPEntry {
	out := map[string]opencode.MCPEntry{}
	trust := private.Trust{UID: uid, RootMayOwn: true, Readable: true}
	for _, name := range []string{"opencode.json", "opencode.jsonc"} {
		f, _, err := trust.Open("config file", filepath.Join(dir, name))
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, maxConfigFile))
		_ = f.Close()
		if err == nil {
			maps.Copy(out, configServers(b))
		}
	}
	return out
}

// maxConfigFile bounds one config file read.
const maxConfigFile = 4 << 20

// configServers decodes the MCP servers of one OpenCode config file (JSON
// with comments and trailing commas): 2.x's {"mcp":{"servers":{NAME:…}}}
// or 1.x's {"mcp":{NAME:…}}, each server field by field (headers and
// environments are never decoded). A file it cannot read names none.
func configServers(b []byte) map[string]opencode.MCPEntry {
	var top struct {
		MCP map[string]json.RawMessage `json:"mcp"`
	}
	b, err := hujson.Standardize(b)
	if err != nil || json.Unmarshal(b, &top) != nil {
		return nil
	}
	servers := top.MCP
	// A 1.x server named "servers" has a string "type"; 2.x's "servers"
	// is an object of servers.
	if raw, ok := servers["servers"]; ok && opencode.ParseConfigEntry(raw).Type == "" {
		servers = nil
		_ = json.Unmarshal(raw, &servers)
	}
	out := map[string]opencode.MCPEntry{}
	for name, raw := range servers {
		out[name] = opencode.ParseConfigEntry(raw)
	}
	return out
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
	var record []procview.Sightings
	if o.Record != nil {
		if all, err := o.Record.Load(); err == nil {
			record = o.Record.Prune(t, all)
		}
	}
	// Only the processes whose name may be OpenCode's (the native
	// binary, or the npm package's node or bun wrapper around it) are
	// read whole (argv, cwd, owner) here. Every live OpenCode of this
	// user is watched: its children are its servers, never orphans,
	// whichever daemon (if any) follows it.
	f := Found{table: t, scope: procview.Scope{UID: o.UID, Record: record}}
	var openCodes []procview.Process
	for _, p := range all {
		if p.Zombie || !procview.MayBeOpenCode(p.Comm) {
			continue
		}
		full, err := t.Read(p.PID)
		if err == nil && full.Same(p) && !full.Zombie && full.UID == o.UID && procview.IsOpenCode(full) {
			openCodes = append(openCodes, full)
			f.scope.Watched = append(f.scope.Watched, full.PID)
		}
	}
	config := o.localConfig
	if config == nil {
		config = func(dir string) map[string]opencode.MCPEntry { return dirConfig(dir, o.UID) }
	}
	var dirs []string
	var servers []procview.LocalServer
	var checks, dups []Check
	f.Orphans, err = procview.Orphans(t, func(left []string) []procview.LocalServer {
		dirs = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(o.Directories), left...))))
		for _, dir := range dirs {
			cfg := config(dir)
			// A disabled server counts too: a config reload that
			// disabled it is one way its process is left behind.
			for _, name := range opencode.Names(cfg) {
				e := cfg[name]
				if e.Type == "remote" || len(e.Command) == 0 {
					continue
				}
				servers = append(servers, procview.LocalServer{Directory: dir, Name: name, Command: e.Command, Cwd: e.Cwd})
			}
		}
		return servers
	}, f.scope)
	if err != nil {
		checks = append(checks, Check{Warn, "processes", "cannot look for orphaned MCP processes: " + err.Error()})
	}
	for _, oc := range openCodes {
		// The native binary under the npm package's wrapper is followed
		// by the wrapper's view.
		if slices.Contains(f.scope.Watched, oc.PPID) {
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
			dups = append(dups, duplicateCheck(oc.PID, d))
		}
	}
	return f, append(checks, f.checks(len(servers), len(dirs), dups)...)
}

// checks reports what was found: the orphans, then the duplicates dups.
func (f Found) checks(servers, dirs int, dups []Check) []Check {
	if len(f.Orphans) == 0 && len(dups) == 0 {
		ocs := len(f.scope.Watched)
		return []Check{{OK, "processes", fmt.Sprintf("no orphaned or duplicate MCP process (%d OpenCode %s of this user; %d local %s configured in the %d %s looked at)",
			ocs, plural(ocs, "process", "processes"), servers, plural(servers, "server", "servers"), dirs, plural(dirs, "directory", "directories"))}}
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
	return append(checks, dups...)
}

// duplicateCheck reports one server that runs more than once under
// OpenCode pid oc (the npm package's node wrapper when OpenCode runs
// through it).
func duplicateCheck(oc int, d procview.Duplicate) Check {
	older := make([]string, 0, len(d.Children)-1)
	for _, c := range d.Children[:len(d.Children)-1] {
		older = append(older, strconv.Itoa(c.PID))
	}
	newest := d.Children[len(d.Children)-1]
	detail := fmt.Sprintf("%d processes of one server under OpenCode pid %d: pids %s and %d, the %s; restart OpenCode, or end the %s with kill %s; command %s",
		len(d.Children), oc, strings.Join(older, ", "), newest.PID, plural(len(older), "newer", "newest"),
		plural(len(older), "older", "older ones"), strings.Join(older, " "), newest.Command())
	return Check{Warn, keyList(d.Keys), detail}
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
