package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// On ana's machine, with no daemon and no OpenCode to ask: the orphans
// adopted by init and by systemd --user are found (the second through
// the record alone), the child of bo's OpenCode is listed as not
// provably one, and each server of the named directory that runs twice
// under a live OpenCode is a duplicate with its newer pid; identical tool
// commands are not, and nothing else is listed (the third directory is
// not named: its servers are not known). Commands are masked.
func TestFindProcesses(t *testing.T) {
	f, checks := FindProcesses(context.Background(), anaOptions(t))
	var pids []int
	for _, o := range f.Orphans {
		pids = append(pids, o.PID)
	}
	if !slices.Equal(pids, []int{3000, 3001, 5001}) {
		t.Fatalf("orphans %v, want 3000 3001 5001\n%s", pids, describe(checks))
	}
	if !slices.Equal(f.OpenCodes, []int{2000, 4000, 4001}) {
		t.Errorf("OpenCode processes %v", f.OpenCodes)
	}
	want := []string{
		`warn orphan pid 3000: node srv.js --api-key *** (cwd /home/ana/my projéct; parent 1 systemd: reparented to init; runs the command of /home/ana/my projéct: a): started by OpenCode pid 1400 (its OPENCODE_PID and its process group), which is gone`,
		`warn orphan pid 3001: python3 -m srvc --header 'Authorization: ***' (cwd /home/ana/other dir; parent 900 systemd: reparented to a subreaper; runs the command of /home/ana/other dir: c): seen serving c under OpenCode pid 1500 (started ` + time.Unix(1796110733+400, 0).Format(time.DateTime) + `), which is gone`,
		`warn possibly left over pid 5001: node srv.js --api-key *** (cwd /home/ana/my projéct; parent 5000 opencode: child of an OpenCode that is not watched; runs the command of /home/ana/my projéct: a): its OpenCode still runs; not proven an orphan, so never reaped: end it yourself if it is one`,
		`warn orphans: 2 orphaned MCP processes: end them with mcp-reconnect doctor --reap (it asks before each one)`,
		`warn /home/ana/my projéct: a: 2 processes of one server under OpenCode pid 2000: pids 2100 and 2101, the newer; restart OpenCode, or end the older with kill 2100; command node srv.js --api-key ***`,
	}
	if got := describeLines(checks); !slices.Equal(got, want) {
		t.Fatalf("checks\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range checks {
		if strings.Contains(c.Detail, "sk-live") || strings.Contains(c.Detail, "ghp_") {
			t.Errorf("a secret in %+v", c)
		}
	}
}

// A clean machine says so, with what was looked at.
func TestFindProcessesClean(t *testing.T) {
	root := t.TempDir()
	var procs []fakeProc
	for _, p := range anaProcs() {
		if p.PID < 3000 && p.PID != 2101 {
			procs = append(procs, p)
		}
	}
	writeTree(t, root, procs)
	o := anaOptions(t)
	o.ProcessTable = func() (procview.Table, error) { return procview.ProcFS(root) }
	f, checks := FindProcesses(context.Background(), o)
	if len(f.Orphans) != 0 || len(f.Duplicates) != 0 || len(checks) != 1 || checks[0].Severity != OK ||
		checks[0].Detail != "no orphaned or duplicate MCP process (1 OpenCode process of this user; 2 local servers configured in the 3 directories looked at)" {
		t.Fatalf("checks %s", describe(checks))
	}
}

// Without a process table (another system) the checks say so and fail
// nothing; a doctor without ProcessTable (tests of OpenCode alone) adds
// none.
func TestFindProcessesWithoutTable(t *testing.T) {
	o := Options{ProcessTable: func() (procview.Table, error) {
		return nil, fmt.Errorf("procview: no process table reader for this system")
	}}
	if _, checks := FindProcesses(context.Background(), o); len(checks) != 1 || checks[0].Severity != Info {
		t.Fatalf("checks %s", describe(checks))
	}
	if _, checks := FindProcesses(context.Background(), Options{}); checks != nil {
		t.Fatalf("checks %s", describe(checks))
	}
}

func describeLines(checks []Check) []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.Severity+" "+c.Name+": "+c.Detail)
	}
	return out
}

// Three processes of one server: the newest is named, and the two older
// ones are the ones to kill.
func TestFindProcessesThreeOfOneServer(t *testing.T) {
	root := t.TempDir()
	procs := anaProcs()
	procs = append(procs, fakeProc{PID: 2105, PPID: 2000, UID: ana, Start: 97000, Argv: srvA, Cwd: proj})
	writeTree(t, root, procs)
	o := anaOptions(t)
	o.ProcessTable = func() (procview.Table, error) { return procview.ProcFS(root) }
	_, checks := FindProcesses(context.Background(), o)
	want := "warn /home/ana/my projéct: a: 3 processes of one server under OpenCode pid 2000: pids 2100, 2101 and 2105, the newest; restart OpenCode, or end the older ones with kill 2100 2101; command node srv.js --api-key ***"
	if !slices.Contains(describeLines(checks), want) {
		t.Fatalf("checks\n%s\nwant the line\n%s", describe(checks), want)
	}
}

// A left-over process is matched on the servers of its own working
// directory (and of each --directory), and of no other: doctor does not
// search OpenCode's config files, so a server configured only in a
// parent directory's file is not known, and its process is not listed.
func TestFindProcessesReadsOnlyTheDirectoriesThemselves(t *testing.T) {
	root := t.TempDir()
	const solo, parent = "/home/ana/solo", "/home/ana"
	writeTree(t, root, []fakeProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Comm: "init", Cwd: "/"},
		{PID: 3000, PPID: 1, PGID: 1400, UID: ana, Start: 50000, Argv: srvA, Cwd: solo, Env: []string{"OPENCODE_PID=1400"}},
	})
	var asked []string
	o := Options{
		ProcessTable: func() (procview.Table, error) { return procview.ProcFS(root) },
		UID:          ana,
		localConfig: func(dir string) map[string]opencode.MCPEntry {
			asked = append(asked, dir)
			if dir == parent {
				return map[string]opencode.MCPEntry{"a": {Type: "local", Command: srvA}}
			}
			return nil
		},
	}
	if f, checks := FindProcesses(context.Background(), o); len(f.Orphans) != 0 || !slices.Equal(asked, []string{solo}) {
		t.Fatalf("configured in the parent only: orphans %+v, directories read %q\n%s", f.Orphans, asked, describe(checks))
	}
	o.Directories, asked = []string{parent}, nil
	f, checks := FindProcesses(context.Background(), o)
	if len(f.Orphans) != 1 || f.Orphans[0].PID != 3000 || !f.Orphans[0].Evidence.Proven() || f.Orphans[0].Servers[0] != (procview.Key{Directory: parent, Name: "a"}) {
		t.Fatalf("the parent named: orphans %+v\n%s", f.Orphans, describe(checks))
	}
}

// A directory's servers are those of its opencode.json and opencode.jsonc
// (JSON with comments and trailing commas; either generation's shape; the
// .jsonc wins a name both name), and of no other file: not a parent's,
// not .opencode/'s. A file another user could change names none.
func TestDirConfigReadsTheDirectorysOwnFiles(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "opencode.json"), []byte(`{"mcp":{"a":{"type":"local","command":["old"]},"servers":{"type":"local","command":["s"]}}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "opencode.jsonc"), []byte("// 2.x\n{\"mcp\":{\"servers\":{\"a\":{\"type\":\"local\",\"command\":[\"node\",\"a // b.js\",],/* x */},},},}"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, ".opencode"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, ".opencode", "opencode.json"), []byte(`{"mcp":{"hidden":{"type":"local","command":["h"]}}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(filepath.Dir(dir), "opencode.json"), []byte(`{"mcp":{"parent":{"type":"local","command":["p"]}}}`), 0o644))
	t.Cleanup(func() { _ = os.Remove(filepath.Join(filepath.Dir(dir), "opencode.json")) })
	cfg := dirConfig(dir, os.Getuid())
	if len(cfg) != 2 || !slices.Equal(cfg["a"].Command, []string{"node", "a // b.js"}) || !slices.Equal(cfg["servers"].Command, []string{"s"}) {
		t.Fatalf("config %+v", cfg)
	}
	must(t, os.Chmod(filepath.Join(dir, "opencode.jsonc"), 0o666))
	if cfg := dirConfig(dir, os.Getuid()); len(cfg) != 2 || !slices.Equal(cfg["a"].Command, []string{"old"}) {
		t.Fatalf("a file others can write was read: %+v", cfg)
	}
}

// standardJSON leaves JSON as it is, and never panics on anything else.
func FuzzStandardJSON(f *testing.F) {
	f.Add([]byte(`{"mcp":{"servers":{"a":{"type":"remote","url":"http://x",},},},}`))
	f.Add([]byte("// c\n{/* x */\"mcp\":{\"servers\":{\"type\":\"local\"}}}"))
	f.Add([]byte(`{"a":"/* not a comment */ // nor this \" , }"}`))
	f.Add([]byte(`"unterminated \`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := standardJSON(b)
		if json.Valid(b) && !bytes.Equal(out, b) {
			t.Fatalf("JSON %q became %q", b, out)
		}
		_ = configServers(b)
	})
}
