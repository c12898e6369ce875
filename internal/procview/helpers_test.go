package procview

import (
	"cmp"
	"fmt"
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
