package procview

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProc is one process of a /proc tree written by writeTree.
type fakeProc struct {
	PID, PPID, UID int
	State          string // "S" unless set; "Z" for a zombie
	Start          uint64 // clock ticks since boot
	Comm           string // the program's base name unless set
	Argv           []string
	Cwd            string // no cwd link when ""
	// Threads are the task ids; [PID] unless set. Children are listed
	// under the last one (OpenCode's TUI starts them from a Worker
	// thread).
	Threads []int
	// NoStat leaves out the stat file: the process vanished while being
	// read.
	NoStat bool
}

func (p fakeProc) comm() string {
	if p.Comm != "" {
		return p.Comm
	}
	if len(p.Argv) > 0 {
		c := filepath.Base(p.Argv[0])
		if len(c) > 15 {
			c = c[:15]
		}
		return c
	}
	return "?"
}

// bootTime is btime of the synthetic trees (the recorded one's too).
const bootTime = 1796110733

// testBoot is memTable's boot id.
const testBoot = "5d2f0b7e-3c1a-4e8b-9f6d-0a1b2c3d4e5f"

// procStatFile is /proc/stat of a synthetic tree.
const procStatFile = `cpu  62019 0 12442 166680 745 0 163 686 0 0
cpu0 30561 0 5866 84460 107 0 47 349 0 0
cpu1 31458 0 6575 82220 638 0 115 337 0 0
intr 1683990 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 15 0 0 0 0 243 119 0 32
ctxt 3402631
btime 1796110733
processes 32525
procs_running 2
procs_blocked 0
softirq 378135 0 53641 9 13660 76872 0 106 102848 267 130732
`

// writeTree writes procs as a /proc tree under root, the children lists
// included, listing extra pids (processes that vanished) as children too.
func writeTree(t testing.TB, root string, procs []fakeProc, vanished map[int][]int) {
	t.Helper()
	must(t, os.MkdirAll(root, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "stat"), []byte(procStatFile), 0o644))
	// The boot the records of the tests name (memTable's too).
	must(t, os.MkdirAll(filepath.Join(root, "sys", "kernel", "random"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "sys", "kernel", "random", "boot_id"), []byte(testBoot+"\n"), 0o644))
	kids := map[int][]int{}
	for _, p := range procs {
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	for ppid, extra := range vanished {
		kids[ppid] = append(kids[ppid], extra...)
	}
	for _, p := range procs {
		writeProc(t, root, p, kids[p.PID])
	}
}

// writeProc writes one process's directory.
func writeProc(t testing.TB, root string, p fakeProc, children []int) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(p.PID))
	must(t, os.MkdirAll(dir, 0o755))
	state := p.State
	if state == "" {
		state = "S"
	}
	threads := p.Threads
	if len(threads) == 0 {
		threads = []int{p.PID}
	}
	if !p.NoStat {
		stat := fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 4194304 639 0 0 0 0 0 0 0 20 0 %d 0 %d 1828069376 2486 18446744073709551615 4194304 8069856 140731842897296 0 0 0 1002060288 0 2143420159 0 0 0 17 1 0 0 0 0 0 12464128 12840768 481480704 140731842899262 140731842899312 140731842899312 140731842899939 0\n",
			p.PID, p.comm(), state, p.PPID, p.PPID, p.PPID, len(threads), p.Start)
		must(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	}
	status := fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\t%s (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t%d\nTracerPid:\t0\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nFDSize:\t64\nGroups:\t \nNStgid:\t%d\nNSpid:\t%d\nThreads:\t%d\nvoluntary_ctxt_switches:\t3\nnonvoluntary_ctxt_switches:\t23\n",
		p.comm(), state, p.PID, p.PID, p.PPID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.PID, p.PID, len(threads))
	must(t, os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
	var cmdline string
	if p.State != "Z" && len(p.Argv) > 0 {
		cmdline = strings.Join(p.Argv, "\x00") + "\x00"
	}
	must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644))
	link := filepath.Join(dir, "cwd")
	_ = os.Remove(link)
	if p.Cwd != "" && p.State != "Z" {
		must(t, os.Symlink(p.Cwd, link))
	}
	_ = os.RemoveAll(filepath.Join(dir, "task"))
	for i, tid := range threads {
		td := filepath.Join(dir, "task", strconv.Itoa(tid))
		must(t, os.MkdirAll(td, 0o755))
		var list []byte
		if i == len(threads)-1 {
			list = childList(children)
		}
		must(t, os.WriteFile(filepath.Join(td, "children"), list, 0o644))
	}
}

// setChildren rewrites pid's children list (on its last thread).
func setChildren(t testing.TB, root string, pid int, children []int) {
	t.Helper()
	tasks, err := os.ReadDir(filepath.Join(root, strconv.Itoa(pid), "task"))
	must(t, err)
	list := childList(children)
	for i, task := range tasks {
		f := filepath.Join(root, strconv.Itoa(pid), "task", task.Name(), "children")
		if i == len(tasks)-1 {
			must(t, os.WriteFile(f, list, 0o644))
		} else {
			must(t, os.WriteFile(f, nil, 0o644))
		}
	}
}

// childList is a children file's content: "12 345 ".
func childList(children []int) []byte {
	var b []byte
	for _, c := range children {
		b = strconv.AppendInt(b, int64(c), 10)
		b = append(b, ' ')
	}
	return b
}

// missing skips a test whose dependency (a program, a kernel feature,
// root) is absent here; under CI, where .ci/run provides every one, it
// fails.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("missing under CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// memTable is a Table in memory, for tests that drive time.
type memTable struct {
	mu    sync.Mutex
	procs map[int]Process
	// hidden children are left out of Children (the kernel's list
	// missing a child while the tree changes).
	hidden map[int]bool
	reads  int
	// env holds what Env reads: a process's OPENCODE_PID, say.
	env map[int]map[string]string
	// bootID is the boot's identity ("": testBoot).
	bootID string
}

func newMemTable(ps ...Process) *memTable {
	m := &memTable{procs: map[int]Process{}, hidden: map[int]bool{}, env: map[int]map[string]string{}}
	for _, p := range ps {
		m.put(p)
	}
	return m
}

// Now implements Table: the fake clock's time since the boot, in ticks
// (the births of the trees here are ticks since bootTime).
func (m *memTable) Now() uint64 {
	return uint64(max(time.Since(time.Unix(bootTime, 0)), 0) / (time.Second / userHZ))
}

// BootID implements Table (zero: testBoot).
func (m *memTable) BootID() string { return cmp.Or(m.bootID, testBoot) }

func (m *memTable) put(p Process) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.procs[p.PID] = p
}

func (m *memTable) remove(pid int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.procs, pid)
}

func (m *memTable) update(pid int, f func(*Process)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.procs[pid]
	f(&p)
	m.procs[pid] = p
}

func (m *memTable) List() ([]Process, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Process
	for _, pid := range slices.Sorted(maps.Keys(m.procs)) {
		p := m.procs[pid]
		out = append(out, Process{PID: p.PID, PPID: p.PPID, PGID: p.PGID, UID: -1, Zombie: p.Zombie, Start: p.Start, Birth: p.Birth, Comm: p.Comm})
	}
	return out, nil
}

func (m *memTable) Stat(pid int) (Process, error) {
	p, err := m.Read(pid)
	p.UID, p.Cwd, p.Argv = -1, "", nil
	return p, err
}

func (m *memTable) Read(pid int) (Process, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	p, ok := m.procs[pid]
	if !ok {
		return Process{}, ErrGone
	}
	if p.Zombie {
		p.Cwd, p.Argv = "", nil
	}
	return p, nil
}

func (m *memTable) Children(pid int) ([]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.procs[pid]; !ok {
		return nil, ErrGone
	}
	var out []int
	for _, c := range slices.Sorted(maps.Keys(m.procs)) {
		if m.procs[c].PPID == pid && !m.hidden[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// setEnv sets one variable of pid's environment.
func (m *memTable) setEnv(pid int, name, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.env[pid] == nil {
		m.env[pid] = map[string]string{}
	}
	m.env[pid][name] = value
}

func (m *memTable) Env(pid int, name string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.procs[pid]; !ok {
		return "", false, ErrGone
	}
	v, ok := m.env[pid][name]
	return v, ok, nil
}

// physical is dir as the kernel reports a working directory (resolve).
func physical(dir string) string {
	p, _ := resolve(dir)
	return p
}

var update = flag.Bool("update", false, "rewrite testdata/synthetic from syntheticProcs")

// The synthetic machine of testdata/synthetic: user ana (uid 1000) runs an
// OpenCode TUI (2000) in "/home/ana/my projéct", whose MCP children are
// listed under its Worker thread, beside orphans of an OpenCode that died,
// another OpenCode, another user, and a server ana runs by hand.
const (
	ana     = 1000
	project = "/home/ana/my projéct"
	other   = "/home/ana/other dir"
)

var (
	mySrv  = []string{"node", "srv.js", "--name", "café au lait"}
	ghCmd  = []string{"npx", "-y", "@modelcontextprotocol/server-github"}
	proxy  = []string{"/usr/local/bin/mcp-proxy", "--header", "Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123", "https://mcp.example.com/x"}
	ghArgv = []string{"node", "/usr/bin/npx", "-y", "@modelcontextprotocol/server-github"} // the kernel ran the npx script by its interpreter
)

func syntheticServers() []LocalServer {
	return []LocalServer{
		{Directory: project, Name: "my server", Command: mySrv},
		{Directory: project, Name: "gh", Command: ghCmd},
		{Directory: other, Name: "proxy", Command: proxy, Cwd: "sub dir"},
		{Directory: other, Name: "gh", Command: ghCmd},
	}
}

func syntheticProcs() ([]fakeProc, map[int][]int) {
	procs := []fakeProc{
		{PID: 1, PPID: 0, UID: 0, Start: 1, Argv: []string{"/sbin/init", "splash"}, Comm: "systemd", Cwd: "/"},
		{PID: 900, PPID: 1, UID: ana, Start: 900, Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Comm: "systemd", Cwd: "/"},
		{PID: 1000, PPID: 900, UID: ana, Start: 1000, Argv: []string{"-bash"}, Comm: "bash", Cwd: "/home/ana"},
		// The watched OpenCode: a TUI, its MCP children on the Worker thread.
		{PID: 2000, PPID: 1000, UID: ana, Start: 88000, Argv: []string{"/home/ana/.opencode/bin/opencode", "--port", "4096"}, Cwd: project, Threads: []int{2000, 2001, 2005}},
		{PID: 2100, PPID: 2000, UID: ana, Start: 89000, Argv: mySrv, Cwd: project},
		{PID: 2101, PPID: 2000, UID: ana, Start: 89001, Argv: ghArgv, Cwd: project},
		{PID: 2102, PPID: 2000, UID: ana, Start: 89002, Argv: proxy, Cwd: other + "/sub dir", Comm: "mcp-proxy"},
		{PID: 2103, PPID: 2000, UID: ana, Start: 89003, State: "Z", Comm: "node"}, // other dir's gh: exited, not yet reaped
		{PID: 2105, PPID: 2000, UID: ana, Start: 89005, NoStat: true, Argv: mySrv, Cwd: other},
		{PID: 2106, PPID: 2000, UID: ana, Start: 95000, Argv: mySrv, Cwd: project}, // a duplicate
		{PID: 2107, PPID: 2000, UID: ana, Start: 95001, Argv: []string{"bash", "-c", "rg 'ünï code' | head"}, Cwd: project, Comm: "my srv (x) ü"},
		// Orphans of an OpenCode that died: adopted by init and by systemd --user.
		{PID: 3000, PPID: 1, UID: ana, Start: 50000, Argv: mySrv, Cwd: project},
		{PID: 3001, PPID: 900, UID: ana, Start: 50001, Argv: ghArgv, Cwd: other},
		{PID: 3004, PPID: 1, UID: ana, Start: 50004, State: "Z", Comm: "node"},
		// Not orphans: another user's, one ana runs by hand.
		{PID: 3002, PPID: 1, UID: 1001, Start: 50002, Argv: mySrv, Cwd: "/home/bo/my projéct"},
		{PID: 3003, PPID: 1000, UID: ana, Start: 50003, Argv: mySrv, Cwd: project},
		// Another OpenCode (serve), not watched, and its child.
		{PID: 4000, PPID: 1000, UID: ana, Start: 60000, Argv: []string{"opencode", "serve"}, Cwd: "/home/ana"},
		{PID: 4001, PPID: 4000, UID: ana, Start: 60001, Argv: mySrv, Cwd: project},
	}
	// 2104 exited between OpenCode's children list and its own read.
	return procs, map[int][]int{2000: {2104}}
}

// writeSynthetic writes the synthetic machine under root.
func writeSynthetic(t testing.TB, root string) {
	procs, vanished := syntheticProcs()
	writeTree(t, root, procs, vanished)
}

// testdata/synthetic is what writeSynthetic writes (go test -run
// TestSyntheticFixture -update rewrites it).
func TestSyntheticFixture(t *testing.T) {
	want := filepath.Join("testdata", "synthetic")
	if *update {
		must(t, os.RemoveAll(want))
		writeSynthetic(t, want)
	}
	got := t.TempDir()
	writeSynthetic(t, got)
	if d := diffTrees(t, got, want); d != "" {
		t.Fatalf("testdata/synthetic is stale (%s): go test -run TestSyntheticFixture -update", d)
	}
}

// diffTrees names the first difference between two trees.
func diffTrees(t *testing.T, a, b string) string {
	seen := map[string]bool{}
	var diff string
	walk := func(root, other string, both bool) {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || diff != "" {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if both && seen[rel] {
				return nil
			}
			seen[rel] = true
			q := filepath.Join(other, rel)
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				l1, _ := os.Readlink(p)
				l2, err := os.Readlink(q)
				if err != nil || l1 != l2 {
					diff = rel + " link"
				}
			case d.IsDir():
				if fi, err := os.Stat(q); err != nil || !fi.IsDir() {
					diff = rel + " dir"
				}
			default:
				b1, _ := os.ReadFile(p)
				b2, err := os.ReadFile(q)
				if err != nil || !bytes.Equal(b1, b2) {
					diff = rel
				}
			}
			return nil
		})
	}
	walk(a, b, false)
	walk(b, a, true)
	return diff
}

// configured names servers whatever the working directories of the
// processes that look left over.
func configured(servers []LocalServer) func([]string) []LocalServer {
	return func([]string) []LocalServer { return servers }
}
