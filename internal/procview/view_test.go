package procview

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func pids(cs []Child) []int {
	var out []int
	for _, c := range cs {
		out = append(out, c.PID)
	}
	return out
}

func newView(t testing.TB, tab Table, pid int, servers []LocalServer) *View {
	t.Helper()
	v, err := NewView(tab, pid)
	if err != nil {
		t.Fatal(err)
	}
	v.SetServers(servers)
	return v
}

func scan(t testing.TB, v *View) Snapshot {
	t.Helper()
	s, err := v.Scan()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What the real OpenCode 1.18.34 ran, recorded: each configured server
// is found by its command in its working directory, a relative cwd and
// a relative command included, and a `sh -c` server is served by the sh.
func TestViewRecordedOpenCode(t *testing.T) {
	dir := "/tmp/procx/my projéct"
	servers := []LocalServer{
		{Directory: dir, Name: "plain", Command: []string{"/tmp/procx/mcpserver", "-transport", "stdio", "-name", "plain"}},
		{Directory: dir, Name: "with cwd", Command: []string{"../mcpserver", "-transport", "stdio", "-name", "Authorization: Bearer sekrit"}, Cwd: "sub dir"},
		{Directory: dir, Name: "abs cwd", Command: []string{"/tmp/procx/mcpserver", "-transport", "stdio"}, Cwd: "/tmp"},
		{Directory: dir, Name: "shell", Command: []string{"sh", "-c", "/tmp/procx/mcpserver -transport stdio; echo done"}},
	}
	v := newView(t, openTable(t, filepath.Join("testdata", "opencode-1.18.34")), 21276, servers)
	s := scan(t, v)
	want := map[string]int{"plain": 21919, "with cwd": 21496, "abs cwd": 21929, "shell": 21506}
	for name, pid := range want {
		c, ok := s.Child(Key{dir, name})
		if !ok || c.PID != pid || c.Parent != 21276 {
			t.Errorf("%s served by %+v (found %v), want pid %d", name, c, ok, pid)
		}
	}
	if len(s.Others) != 0 || len(s.Duplicates()) != 0 {
		t.Errorf("others %v duplicates %v, want none", s.Others, s.Duplicates())
	}
	if c, _ := s.Child(Key{dir, "with cwd"}); strings.Contains(c.Command(), "sekrit") {
		t.Errorf("a child's Command shows a secret: %q", c.Command())
	}
}

// The synthetic TUI: children on its Worker thread, a server run by its
// interpreter, a duplicate, a zombie and two vanished processes.
func TestViewSynthetic(t *testing.T) {
	v := newView(t, openTable(t, filepath.Join("testdata", "synthetic")), 2000, syntheticServers())
	s := scan(t, v)
	for k, want := range map[Key][]int{
		{project, "my server"}: {2100, 2106},
		{project, "gh"}:        {2101},
		{other, "proxy"}:       {2102},
	} {
		if got := pids(s.Servers[k]); !slices.Equal(got, want) {
			t.Errorf("%v served by %v, want %v", k, got, want)
		}
	}
	if cs := s.Servers[Key{other, "gh"}]; len(cs) != 0 {
		t.Errorf("other dir's gh served by %v: a zombie serves nothing", pids(cs))
	}
	if got := pids(s.Others); !slices.Equal(got, []int{2107}) {
		t.Errorf("others %v, want [2107]", got)
	}
	d := s.Duplicates()
	if len(d) != 1 || d[0].Keys[0] != (Key{project, "my server"}) || !slices.Equal(pids(d[0].Children), []int{2100, 2106}) {
		t.Errorf("duplicates %+v", d)
	}
	if c, _ := s.Child(Key{project, "my server"}); c.PID != 2106 {
		t.Errorf("Child gives %d, want the newest (2106)", c.PID)
	}
	if c, _ := s.Child(Key{other, "proxy"}); c.Command() != "/usr/local/bin/mcp-proxy --header 'Authorization: ***' https://mcp.example.com/x" {
		t.Errorf("proxy command shown as %q", c.Command())
	}
}

// A scan after a child exited reports it, with the time bounds; a new
// child for the same server is reported as started.
func TestViewReportsExitAndStart(t *testing.T) {
	root := t.TempDir()
	writeSynthetic(t, root)
	v := newView(t, openTable(t, root), 2000, syntheticServers())
	first := scan(t, v)
	must(t, os.RemoveAll(filepath.Join(root, "2101")))
	writeProc(t, root, fakeProc{PID: 2200, PPID: 2000, UID: ana, Start: 99000, Argv: ghArgv, Cwd: project}, nil)
	setChildren(t, root, 2000, []int{2100, 2102, 2106, 2107, 2200})
	second := scan(t, v)
	want := []string{"exited gh 2101", "started gh 2200"}
	if got := describe(first, second); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if ev := describe(second, scan(t, v)); len(ev) != 0 {
		t.Fatalf("an unchanged scan gave %v", ev)
	}
}

// describe lists what changed from prev to next, as Run tells its
// handler: "exited KEY PID", then "started KEY PID".
func describe(prev, next Snapshot) []string {
	var out []string
	changes(prev, next, func(started bool, k Key, c Child) {
		out = append(out, fmt.Sprintf("%s %s %d", map[bool]string{false: "exited", true: "started"}[started], k.Name, c.PID))
	})
	return out
}

// An idle scan reads OpenCode's stat and its children lists, whatever
// the number of children: the cost BENCHMARKS.md measures.
func TestIdleScanReadsOnlyTheChildrenLists(t *testing.T) {
	pt := openTable(t, filepath.Join("testdata", "synthetic"))
	v := newView(t, pt, 2000, syntheticServers())
	scan(t, v)
	before := pt.reads.Load()
	scan(t, v)
	// OpenCode's stat, the task directory and 3 threads' lists; the
	// zombie and the vanished children still listed are not read again.
	if n := pt.reads.Load() - before; n != 5 {
		t.Fatalf("an idle scan read %d files, want 5", n)
	}
}

// The kernel's list of children can miss one while the tree changes: a
// child missing from it but alive, same birth, same parent, has not
// exited.
func TestViewChildMissingFromListIsNoExit(t *testing.T) {
	tab, oc := simpleTable()
	v := newView(t, tab, oc, simpleServers())
	first := scan(t, v)
	tab.hidden[101] = true
	if ev := describe(first, scan(t, v)); len(ev) != 0 {
		t.Fatalf("a child missing from the list only: %v", ev)
	}
	tab.remove(101)
	if got := describe(first, scan(t, v)); !slices.Equal(got, []string{"exited a 101"}) {
		t.Fatalf("events %v", got)
	}
}

// A reused pid (same pid, another start) is an exit and a start.
func TestViewPidReuse(t *testing.T) {
	tab, oc := simpleTable()
	v := newView(t, tab, oc, simpleServers())
	first := scan(t, v)
	tab.hidden[101] = true // gone from the list for one scan...
	tab.update(101, func(p *Process) { p.Birth += 500; p.Start = p.Start.Add(5 * time.Second) })
	second := scan(t, v) // ...and the pid is another process now
	tab.hidden[101] = false
	third := scan(t, v)
	got := append(describe(first, second), describe(second, third)...)
	if want := []string{"exited a 101", "started a 101"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// A changed config assigns children again; a child that lives on is no
// event, and the view reads nothing again for it.
func TestViewConfigChangeIsNoEvent(t *testing.T) {
	tab, oc := simpleTable()
	v := newView(t, tab, oc, simpleServers())
	first := scan(t, v)
	reads := tab.reads
	v.SetServers(simpleServers()[:1])
	second := scan(t, v)
	if ev := describe(first, second); len(ev) != 0 {
		t.Fatalf("events %v", ev)
	}
	if _, ok := second.Child(Key{"/p", "b"}); ok || len(second.Others) != 1 {
		t.Fatalf("after the change b is %v, others %v", second.Servers, second.Others)
	}
	if n := tab.reads - reads; n != 1 {
		t.Fatalf("the scan after a config change read %d processes, want 1 (OpenCode)", n)
	}
}

// OpenCode exiting ends the view, its children not reported one by one;
// so does its pid taken by another process.
func TestViewOpenCodeExit(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		tab, oc := simpleTable()
		v := newView(t, tab, oc, simpleServers())
		first := scan(t, v)
		if reuse {
			tab.update(oc, func(p *Process) { p.Birth++ })
		} else {
			tab.remove(oc)
		}
		tab.update(101, func(p *Process) { p.PPID = 1 })
		second := scan(t, v)
		if got := describe(first, second); !second.Gone || len(got) != 0 {
			t.Fatalf("reuse=%v: gone=%v events %v", reuse, second.Gone, got)
		}
		if ev := describe(second, scan(t, v)); len(ev) != 0 {
			t.Fatalf("after the exit: %v", ev)
		}
	}
}

// npm's opencode is a node script that runs the native binary as its
// child: the binary's children are the watched OpenCode's.
func TestViewNodeWrapper(t *testing.T) {
	boot := time.Unix(bootTime, 0)
	tab := newMemTable(
		Process{PID: 50, PPID: 1, UID: ana, Birth: 50, Start: boot, Comm: "node", Argv: []string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, Cwd: "/p"},
		Process{PID: 51, PPID: 50, UID: ana, Birth: 51, Start: boot, Comm: "opencode", Argv: []string{"/usr/lib/node_modules/opencode-linux-x64/bin/opencode"}, Cwd: "/p"},
		Process{PID: 52, PPID: 51, UID: ana, Birth: 52, Start: boot, Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
	)
	v := newView(t, tab, 50, simpleServers())
	s := scan(t, v)
	if c, ok := s.Child(Key{"/p", "a"}); !ok || c.PID != 52 || c.Parent != 51 {
		t.Fatalf("a served by %+v %v", c, ok)
	}
	if len(s.Others) != 0 {
		t.Fatalf("the wrapped binary is listed as another child: %v", s.Others)
	}
}

// Servers configured alike (same command, same place) share their
// children; duplicates are counted against their number.
func TestViewServersConfiguredAlike(t *testing.T) {
	tab, oc := simpleTable()
	servers := append(simpleServers(), LocalServer{Directory: "/p", Name: "a2", Command: []string{"srv", "a"}})
	v := newView(t, tab, oc, servers)
	s := scan(t, v)
	if !slices.Equal(pids(s.Servers[Key{"/p", "a2"}]), []int{101}) || len(s.Alike(Key{"/p", "a"})) != 2 || len(s.Duplicates()) != 0 {
		t.Fatalf("alike: %v %v dup %v", s.Servers, s.Alike(Key{"/p", "a"}), s.Duplicates())
	}
	tab.remove(101)
	if got := describe(s, scan(t, v)); !slices.Equal(got, []string{"exited a 101", "exited a2 101"}) {
		t.Fatalf("events %v", got)
	}
}

// simpleTable: OpenCode 100 in /p with children 101 (srv a) and 102 (srv b).
func simpleTable() (*memTable, int) {
	boot := time.Unix(bootTime, 0)
	proc := func(pid, ppid int, argv ...string) Process {
		return Process{PID: pid, PPID: ppid, UID: ana, Birth: uint64(pid) * 100, Start: boot.Add(time.Duration(pid) * time.Second),
			Comm: filepath.Base(argv[0]), Argv: argv, Cwd: "/p"}
	}
	return newMemTable(proc(100, 1, "opencode", "serve"), proc(101, 100, "srv", "a"), proc(102, 100, "srv", "b")), 100
}

func simpleServers() []LocalServer {
	return []LocalServer{
		{Directory: "/p", Name: "a", Command: []string{"srv", "a"}},
		{Directory: "/p", Name: "b", Command: []string{"srv", "b"}},
	}
}

// syntheticMany writes an OpenCode with dirs×perDir children, one server
// each, for the benchmarks.
func syntheticMany(t testing.TB, root string, dirs, perDir int) []LocalServer {
	procs := []fakeProc{{PID: 100, PPID: 1, UID: ana, Start: 1000, Argv: []string{"opencode", "serve"}, Cwd: "/home/ana",
		Threads: []int{100, 101, 102, 103, 104, 105, 106, 107}}}
	var servers []LocalServer
	pid := 1000
	for d := range dirs {
		dir := "/home/ana/projects/project " + strconv.Itoa(d)
		for s := range perDir {
			cmd := []string{"node", "/home/ana/mcp/server-" + strconv.Itoa(s) + ".js", "--stdio"}
			servers = append(servers, LocalServer{Directory: dir, Name: "server " + strconv.Itoa(s), Command: cmd})
			procs = append(procs, fakeProc{PID: pid, PPID: 100, UID: ana, Start: uint64(2000 + pid), Argv: cmd, Cwd: dir})
			pid++
		}
	}
	writeTree(t, root, procs, nil)
	return servers
}

// A scan that takes long stretches the period to 1,000 times its
// duration (at most a minute): the view stays under 0.1 % of a core.
func TestScanPeriodStretchesForSlowScans(t *testing.T) {
	for _, c := range []struct{ every, took, want time.Duration }{
		{2 * time.Second, 0, 2 * time.Second},
		{2 * time.Second, time.Millisecond, 2 * time.Second},
		{2 * time.Second, 10 * time.Millisecond, 10 * time.Second},
		{2 * time.Second, time.Second, time.Minute},
		{30 * time.Second, 10 * time.Millisecond, 30 * time.Second},
	} {
		if got := scanPeriod(c.every, c.took); got != c.want {
			t.Errorf("scanPeriod(%v, %v) = %v, want %v", c.every, c.took, got, c.want)
		}
	}
}
