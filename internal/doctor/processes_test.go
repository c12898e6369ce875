package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// On ana's machine, with no daemon and no OpenCode to ask: the orphans
// adopted by init and by systemd --user are found (the second through
// its own cwd alone), the child of bo's OpenCode is listed as not
// provably one, and each server that runs twice under a live OpenCode is
// a duplicate with its newer pid; identical tool commands are not, and
// nothing else is listed. Commands are masked.
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
		`warn /home/ana/third dir: a: 2 processes of one server under OpenCode pid 4000: pids 4002 and 4003, the newer; restart OpenCode, or end the older with kill 4002; command node srv.js --api-key ***`,
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

// The directories a running daemon has armed are read too: an orphan
// whose cwd is not its directory (a server with a cwd of its own) is
// found through them.
func TestFindProcessesReadsArmedDirectories(t *testing.T) {
	root := t.TempDir()
	const armed = "/home/ana/armed"
	procs := []fakeProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Comm: "init", Cwd: "/"},
		{PID: 3000, PPID: 1, UID: ana, Start: 50000, Argv: srvB, Cwd: "/srv/data", Comm: "srvb"},
	}
	writeTree(t, root, procs)
	daemon := fakeDaemon(t, armed)
	o := Options{
		Daemon:       daemon,
		ProcessTable: func() (procview.Table, error) { return procview.ProcFS(root) },
		UID:          ana,
		localConfig: func(dir string) map[string]opencode.MCPEntry {
			if dir == armed {
				return map[string]opencode.MCPEntry{"b": {Type: "local", Command: srvB, Cwd: "/srv/data"}}
			}
			return nil
		},
	}
	f, checks := FindProcesses(context.Background(), o)
	if len(f.Orphans) != 1 || f.Orphans[0].PID != 3000 || f.Orphans[0].Servers[0] != (procview.Key{Directory: armed, Name: "b"}) {
		t.Fatalf("orphans %+v\n%s", f.Orphans, describe(checks))
	}
}

// A process adopted by init names its own directory: its server is found
// in the config there, with no daemon, record or --directory to say so.
func TestFindProcessesReadsTheDirectoryOfALeftOverProcess(t *testing.T) {
	root := t.TempDir()
	const solo = "/home/ana/solo"
	writeTree(t, root, []fakeProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Comm: "init", Cwd: "/"},
		{PID: 3000, PPID: 1, PGID: 1400, UID: ana, Start: 50000, Argv: srvA, Cwd: solo, Env: []string{"OPENCODE_PID=1400"}},
	})
	o := Options{
		ProcessTable: func() (procview.Table, error) { return procview.ProcFS(root) },
		UID:          ana,
		localConfig: func(dir string) map[string]opencode.MCPEntry {
			if dir == solo {
				return map[string]opencode.MCPEntry{"a": {Type: "local", Command: srvA}}
			}
			return nil
		},
	}
	f, checks := FindProcesses(context.Background(), o)
	if len(f.Orphans) != 1 || f.Orphans[0].PID != 3000 || !f.Orphans[0].Evidence.Proven() || f.Orphans[0].Servers[0] != (procview.Key{Directory: solo, Name: "a"}) {
		t.Fatalf("orphans %+v\n%s", f.Orphans, describe(checks))
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

// fakeDaemon answers GET /status with one OpenCode whose directory dir
// is armed.
func fakeDaemon(t *testing.T, dir string) *statusapi.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(statusapi.Status{Servers: []statusapi.ServerStatus{{Snapshot: reconnect.Snapshot{URL: "http://127.0.0.1:4096", Directories: []reconnect.DirSnapshot{{Directory: dir}}}}}})
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &statusapi.Client{Addr: l.Addr().String()}
}

func describeLines(checks []Check) []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.Severity+" "+c.Name+": "+c.Detail)
	}
	return out
}

// Run lists the processes whether OpenCode answers or not: the orphan of
// a killed OpenCode is the case.
func TestRunListsOrphansWithoutOpenCode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	checks := Run(context.Background(), dead, opencode.Options{}, anaOptions(t))
	out := describe(checks)
	if Healthy(checks) || !strings.Contains(out, "FAIL reachable") || !strings.Contains(out, "warn orphan pid 3000") {
		t.Fatalf("checks\n%s", out)
	}
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
