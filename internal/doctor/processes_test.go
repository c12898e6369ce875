package doctor

import (
	"bytes"
	"context"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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
	if !slices.Equal(f.scope.Watched, []int{2000, 4000, 4001}) {
		t.Errorf("OpenCode processes %v", f.scope.Watched)
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
	if len(f.Orphans) != 0 || len(checks) != 1 || checks[0].Severity != OK ||
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

// configServers never panics on anything, JSON with comments or not.
func FuzzConfigServers(f *testing.F) {
	f.Add([]byte(`{"mcp":{"servers":{"a":{"type":"remote","url":"http://x",},},},}`))
	f.Add([]byte("// c\n{/* x */\"mcp\":{\"servers\":{\"type\":\"local\"}}}"))
	f.Add([]byte(`{"a":"/* not a comment */ // nor this \" , }"}`))
	f.Add([]byte(`"unterminated \`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = configServers(b)
	})
}

// (Orphans and duplicates: reap "only processes of
// this user whose parentage proves they are orphans"). In a container
// (docker run … opencode serve, a devcontainer whose entrypoint is the
// TUI) OpenCode is pid 1, so every live MCP server it runs has parent 1.
// Doctor skips pid 1 when it looks for live OpenCodes, and procview counts
// any parent 1 as "reparented to init", a proof: the live servers of the
// running OpenCode are listed as proven orphans, and doctor --reap --yes
// ends them all.
func TestLiveChildrenOfOpenCodeAsPID1AreNotOrphans(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, []fakeProc{
		{PID: 1, UID: ana, Start: 1, Argv: []string{"/usr/local/bin/opencode", "serve", "--port", "4096"}, Cwd: proj},
		{PID: 20, PPID: 1, UID: ana, Start: 100, Argv: srvA, Cwd: proj},
		{PID: 21, PPID: 1, UID: ana, Start: 101, Argv: srvB, Cwd: proj, Comm: "srvb"},
	})
	o := anaOptions(t)
	o.ProcessTable = func() (procview.Table, error) { return procview.ProcFS(root) }
	f, checks := FindProcesses(context.Background(), o)
	for _, orphan := range f.Orphans {
		if orphan.Evidence.Proven() {
			t.Errorf("pid %d, a live server of OpenCode (pid 1), listed as a proven orphan (%s)\n%s", orphan.PID, orphan.Why, describe(checks))
		}
	}
	fr := &fakeReap{}
	var report bytes.Buffer
	if err := Reap(context.Background(), o, ReapOptions{Yes: true, Report: &report, reap: fr.reap}); err != nil {
		t.Fatal(err)
	}
	if len(fr.ended) != 0 {
		t.Fatalf("doctor --reap --yes ended %v, the live MCP servers of the running OpenCode:\n%s", fr.ended, report.String())
	}
}

// A recorded-style /proc tree, as procview's tests write them (stat,
// status, cmdline, the cwd link and each thread's children list; never
// environ), of a machine where user ana (uid 1000) runs:
//
//   - an OpenCode serve (2000) in her project, with two children of one
//     server (a duplicate), another server, and two identical tool
//     commands (no server's: no duplicate);
//   - the npm package's node wrapper (4000) around the native binary
//     (4001), whose server in "/home/ana/third dir" runs twice;
//   - orphans of two OpenCode processes that were SIGKILLed: her
//     project's server adopted by init (3000), left by 1400 and proven
//     by its OPENCODE_PID and its process group, and another directory's
//     adopted by systemd --user (3001), a directory no flag and no daemon
//     names (its cwd does), left by 1500 and proven by the record a
//     daemon kept (anaRecord);
//   - a child of bo's OpenCode (5001) running her server: listed, never
//     reaped;
//   - not orphans: bo's copy of the server (3002), one she runs from her
//     shell (3003), an adopted sleep that is no server (3004), a zombie
//     (3005).
const (
	ana      = 1000
	bo       = 1001
	proj     = "/home/ana/my projéct"
	otherDir = "/home/ana/other dir"
	thirdDir = "/home/ana/third dir"
)

var (
	srvA = []string{"node", "srv.js", "--api-key", "sk-live-abcdefghijklmnop"}
	srvB = []string{"/usr/local/bin/srvb", "--name", "café"}
	srvC = []string{"python3", "-m", "srvc", "--header", "Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123"}
	tool = []string{"bash", "-c", "rg 'x y' | head"}
)

type fakeProc struct {
	PID, PPID, UID int
	PGID           int // PPID unless set
	State          string
	Start          uint64
	Comm           string
	Argv           []string
	Cwd            string
	// Env, when set, is written as the environ file (only what a test
	// needs: OPENCODE_PID).
	Env []string
}

func anaProcs() []fakeProc {
	return []fakeProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Comm: "systemd", Cwd: "/"},
		{PID: 900, PPID: 1, UID: ana, Start: 900, Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Comm: "systemd", Cwd: "/"},
		{PID: 1000, PPID: 900, UID: ana, Start: 1000, Argv: []string{"-bash"}, Comm: "bash", Cwd: "/home/ana"},
		{PID: 2000, PPID: 1000, UID: ana, Start: 80000, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: proj},
		{PID: 2100, PPID: 2000, UID: ana, Start: 81000, Argv: srvA, Cwd: proj},
		{PID: 2101, PPID: 2000, UID: ana, Start: 95000, Argv: srvA, Cwd: proj},
		{PID: 2102, PPID: 2000, UID: ana, Start: 81001, Argv: srvB, Cwd: proj, Comm: "srvb"},
		{PID: 2103, PPID: 2000, UID: ana, Start: 96000, Argv: tool, Cwd: proj},
		{PID: 2104, PPID: 2000, UID: ana, Start: 96001, Argv: tool, Cwd: proj},
		{PID: 3000, PPID: 1, PGID: 1400, UID: ana, Start: 50000, Argv: srvA, Cwd: proj, Env: []string{"OPENCODE_PID=1400"}},
		{PID: 3001, PPID: 900, PGID: 1500, UID: ana, Start: 50001, Argv: srvC, Cwd: otherDir},
		{PID: 3002, PPID: 1, UID: bo, Start: 50002, Argv: srvA, Cwd: proj},
		{PID: 3003, PPID: 1000, UID: ana, Start: 50003, Argv: srvA, Cwd: proj},
		{PID: 3004, PPID: 1, UID: ana, Start: 50004, Argv: []string{"sleep", "600"}, Cwd: proj},
		{PID: 3005, PPID: 1, UID: ana, Start: 50005, State: "Z", Comm: "node"},
		{PID: 4000, PPID: 1000, UID: ana, Start: 60000, Argv: []string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, Cwd: "/home/ana"},
		{PID: 4001, PPID: 4000, UID: ana, Start: 60001, Argv: []string{"/usr/lib/node_modules/opencode-ai/node_modules/opencode-linux-x64/bin/opencode"}, Cwd: "/home/ana"},
		{PID: 4002, PPID: 4001, UID: ana, Start: 61000, Argv: srvA, Cwd: thirdDir},
		{PID: 4003, PPID: 4001, UID: ana, Start: 62000, Argv: srvA, Cwd: thirdDir},
		{PID: 5000, PPID: 1, UID: bo, Start: 70000, Argv: []string{"opencode"}, Cwd: "/home/bo"},
		{PID: 5001, PPID: 5000, UID: ana, Start: 70001, Argv: srvA, Cwd: proj},
	}
}

// anaConfig is what the config files of each directory hold.
func anaConfig(dir string) map[string]opencode.MCPEntry {
	local := func(cmd []string) opencode.MCPEntry { return opencode.MCPEntry{Type: "local", Command: cmd} }
	switch dir {
	case proj:
		return map[string]opencode.MCPEntry{"a": local(srvA), "b": local(srvB), "r": {Type: "remote", URL: "https://mcp.example.com"}}
	case otherDir:
		return map[string]opencode.MCPEntry{"c": local(srvC)}
	case thirdDir:
		return map[string]opencode.MCPEntry{"a": local(srvA)}
	}
	return nil
}

// writeTree writes procs as a /proc tree under root.
func writeTree(t testing.TB, root string, procs []fakeProc) {
	t.Helper()
	// /proc/stat: procfs reads the boot time from it.
	must(t, os.MkdirAll(root, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "stat"), []byte("cpu  1 0 1 1 0 0 0 0 0 0\nbtime 1796110733\nprocesses 1\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "sys", "kernel", "random"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "sys", "kernel", "random", "boot_id"), []byte(treeBoot+"\n"), 0o644))
	kids := map[int][]int{}
	for _, p := range procs {
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.PID))
		must(t, os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(p.PID)), 0o755))
		state := p.State
		if state == "" {
			state = "S"
		}
		comm := p.Comm
		if comm == "" {
			comm = filepath.Base(p.Argv[0])
		}
		pgid := p.PGID
		if pgid == 0 {
			pgid = p.PPID
		}
		stat := fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 4194304 639 0 0 0 0 0 0 0 20 0 1 0 %d 1828069376 2486\n", p.PID, comm, state, p.PPID, pgid, pgid, p.Start)
		must(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
		status := fmt.Sprintf("Name:\t%s\nState:\t%s\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", comm, state, p.PID, p.PID, p.PPID, p.UID, p.UID, p.UID, p.UID)
		must(t, os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
		var cmdline string
		if state != "Z" {
			cmdline = strings.Join(p.Argv, "\x00") + "\x00"
			must(t, os.Symlink(p.Cwd, filepath.Join(dir, "cwd")))
		}
		must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644))
		if p.Env != nil {
			must(t, os.WriteFile(filepath.Join(dir, "environ"), []byte(strings.Join(p.Env, "\x00")+"\x00"), 0o600))
		}
		var list []byte
		for _, c := range kids[p.PID] {
			list = append(strconv.AppendInt(list, int64(c), 10), ' ')
		}
		must(t, os.WriteFile(filepath.Join(dir, "task", strconv.Itoa(p.PID), "children"), list, 0o644))
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// anaOptions are doctor's options on ana's machine: her project named
// with --directory, no daemon, and the record a daemon kept while
// OpenCode 1500 lived.
func anaOptions(t testing.TB) Options {
	root := t.TempDir()
	writeTree(t, root, anaProcs())
	return Options{
		Directories:  []string{proj},
		ProcessTable: func() (procview.Table, error) { return procview.ProcFS(root) },
		UID:          ana,
		Record:       anaRecord(t),
		localConfig:  anaConfig,
	}
}

// treeBoot is the boot of the trees writeTree writes, and of anaRecord.
const treeBoot = "0b7e5d2f-3c1a-4e8b-9f6d-0a1b2c3d4e5f"

// anaRecord is what a daemon saw under OpenCode 1500 before it was
// SIGKILLed: 3001 serving otherDir's c (a v2-line OpenCode leaves nothing
// in its children's environment: the record is the evidence there).
func anaRecord(t testing.TB) *procview.Record {
	r := &procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
	boot := time.Unix(1796110733, 0)
	oc := procview.Ident{PID: 1500, Birth: 40000, Start: boot.Add(400 * time.Second), PGID: 1500}
	must(t, r.Save(procview.Sightings{OpenCode: oc, Boot: treeBoot, Seen: []procview.Sighting{
		{Ident: procview.Ident{PID: 3001, Birth: 50001, Start: boot.Add(50001 * 10 * time.Millisecond), PGID: 1500}, Parent: oc, Directory: otherDir, Server: "c"},
	}}))
	return r
}
