package procview

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// userHZ is the unit of the start times in /proc/PID/stat: 100 on every
// platform Go runs Linux on (procfs assumes the same).
const userHZ = 100

// procTable reads a /proc tree: the live one, or a recorded one in tests.
type procTable struct {
	root string
	fs   procfs.FS
	// boot is the boot time (/proc/stat btime), read once: Start is boot
	// plus the start ticks. btime is whole seconds, truncated: Start is
	// early by up to a second, so it is for people; what orders a
	// process against a moment is its Birth against Now.
	boot time.Time
	// bootID is the boot's identity (sys/kernel/random/boot_id); ""
	// when the tree has none.
	bootID string
	// noChildren is set once task/TID/children turned out to be missing
	// (a kernel without CONFIG_PROC_CHILDREN): Children then filters List.
	noChildren atomic.Bool
	// reads counts the files and directories read, for the benchmarks.
	reads atomic.Int64
}

// Now implements Table from uptime: the boot-time clock
// (CLOCK_BOOTTIME, offset alike inside a time namespace), which the
// start ticks count in too, in hundredths of a second truncated as a
// start is; 0 when it cannot be read (then nothing is known to start
// after a reading). A recorded tree's uptime is the clock its test sets.
func (t *procTable) Now() uint64 {
	b, err := readSmall(filepath.Join(t.root, "uptime"), make([]byte, 64))
	if err != nil {
		return 0
	}
	return parseUptime(b)
}

// parseUptime reads the first field of /proc/uptime ("12345.67 ..."),
// seconds with two decimals, as clock ticks; 0 when it is not one.
func parseUptime(b []byte) uint64 {
	up, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte(" "))
	secs, cents, ok := bytes.Cut(up, []byte("."))
	s, err1 := strconv.ParseUint(string(secs), 10, 64)
	c, err2 := strconv.ParseUint(string(cents), 10, 64)
	if !ok || len(cents) != 2 || err1 != nil || err2 != nil || s > math.MaxUint64/userHZ-1 {
		return 0
	}
	return s*userHZ + c
}

// BootID implements Table.
func (t *procTable) BootID() string { return t.bootID }

// ProcFS reads the /proc tree mounted or recorded at root.
func ProcFS(root string) (Table, error) { return newProcTable(root) }

func newProcTable(root string) (*procTable, error) {
	pfs, err := procfs.NewFS(root)
	if err != nil {
		return nil, fmt.Errorf("procview: %s: %w", root, err)
	}
	st, err := pfs.Stat()
	if err != nil {
		return nil, fmt.Errorf("procview: %s/stat: %w", root, err)
	}
	t := &procTable{root: root, fs: pfs, boot: time.Unix(int64(st.BootTime), 0)}
	if b, err := os.ReadFile(filepath.Join(root, "sys", "kernel", "random", "boot_id")); err == nil {
		t.bootID = strings.TrimSpace(string(b))
	}
	return t, nil
}

// List implements Table.
func (t *procTable) List() ([]Process, error) {
	procs, err := t.fs.AllProcs()
	t.reads.Add(1)
	if err != nil {
		return nil, fmt.Errorf("procview: list %s: %w", t.root, err)
	}
	out := make([]Process, 0, len(procs))
	buf := make([]byte, 1024)
	for _, p := range procs {
		st, err := t.readStat(p.PID, buf)
		if err != nil {
			continue // it exited since the listing
		}
		out = append(out, st)
	}
	return out, nil
}

// Stat implements Table.
func (t *procTable) Stat(pid int) (Process, error) {
	return t.readStat(pid, make([]byte, 1024))
}

// readStat reads /proc/PID/stat: it is what List reads thousands of
// times, so with three system calls and a parser that reads only the
// fields it needs (procfs's scans all fifty, ten times slower).
func (t *procTable) readStat(pid int, buf []byte) (Process, error) {
	b, err := readSmall(filepath.Join(t.root, strconv.Itoa(pid), "stat"), buf)
	t.reads.Add(1)
	if err != nil {
		return Process{}, gone(pid, err)
	}
	p, err := parseStat(b)
	if err != nil {
		return Process{}, fmt.Errorf("procview: pid %d: %w", pid, err)
	}
	p.Start = t.boot.Add(time.Duration(p.Birth) * (time.Second / userHZ))
	return p, nil
}

// errStat is a /proc/PID/stat line that is not one.
var errStat = errors.New("procview: malformed stat line")

// parseStat reads pid, comm, state, ppid, pgrp and starttime out of a
// /proc/PID/stat line. The comm is between the first "(" and the last
// ")": a process can name itself ") Z 1 (" to fool a parser that splits
// on spaces.
func parseStat(b []byte) (Process, error) {
	l, r := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if l < 1 || r < l || r+2 > len(b) {
		return Process{}, errStat
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:l])))
	if err != nil {
		return Process{}, errStat
	}
	// After ") ": state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime ...
	var f [20][]byte
	n := 0
	for rest := b[r+2:]; n < len(f); n++ {
		rest = bytes.TrimLeft(rest, " ")
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			i = len(rest)
		}
		if i == 0 {
			break
		}
		f[n], rest = bytes.TrimRight(rest[:i], "\n"), rest[i:]
	}
	if n < len(f) || len(f[0]) != 1 {
		return Process{}, errStat
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Process{}, errStat
	}
	return Process{PID: pid, PPID: ppid, PGID: pgrp, UID: -1, Zombie: f[0][0] == 'Z' || f[0][0] == 'X',
		Birth: start, Comm: string(b[l+1 : r])}, nil
}

// Read implements Table.
func (t *procTable) Read(pid int) (Process, error) {
	buf := make([]byte, 4096)
	out, err := t.readStat(pid, buf)
	if err != nil {
		return Process{}, err
	}
	dir := filepath.Join(t.root, strconv.Itoa(pid))
	status, err := readSmall(filepath.Join(dir, "status"), buf)
	t.reads.Add(1)
	if err != nil {
		return Process{}, gone(pid, err)
	}
	if out.UID, err = parseUID(status); err != nil {
		return Process{}, fmt.Errorf("procview: pid %d: %w", pid, err)
	}
	cmdline, err := readSmall(filepath.Join(dir, "cmdline"), buf)
	t.reads.Add(1)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Process{}, gone(pid, err)
	case err == nil:
		out.Argv = parseCmdline(cmdline)
	}
	// Unreadable for another user's process and for a zombie: left "".
	if cwd, err := os.Readlink(filepath.Join(dir, "cwd")); err == nil {
		out.Cwd = strings.TrimSuffix(cwd, " (deleted)")
	}
	t.reads.Add(1)
	return out, nil
}

// parseCmdline splits /proc/PID/cmdline (NUL-terminated words); nil for
// a zombie's or a kernel thread's empty one. A process that set its
// title (npm: "npm exec pkg a") overwrote its argv's memory with one
// word and NULs: that reads as the one word (see retitled).
func parseCmdline(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return retitled(strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00"))
}

// retitled reads argv that a process title overwrote: node (libuv)
// copies the title over argv[0] and zeroes the rest of the arguments'
// memory, so Linux's cmdline (and macOS's kern.procargs2) reads as the
// title followed by empty words. One word followed by nothing but empty
// words is such a title. A real command whose arguments are all empty
// (prog with two empty arguments) reads the same way and loses them: no
// process tells the two apart.
func retitled(argv []string) []string {
	if len(argv) < 2 || argv[0] == "" || slices.ContainsFunc(argv[1:], func(a string) bool { return a != "" }) {
		return argv
	}
	return argv[:1]
}

// parseUID reads the real uid from /proc/PID/status ("Uid:\tR\tE\tS\tF").
func parseUID(status []byte) (int, error) {
	_, rest, _ := bytes.Cut(status, []byte("\nUid:"))
	f := bytes.Fields(rest)
	if len(f) == 0 {
		return 0, errors.New("procview: status without Uid")
	}
	uid, err := strconv.Atoi(string(f[0]))
	if err != nil {
		return 0, fmt.Errorf("procview: status Uid %q", f[0])
	}
	return uid, nil
}

// gone turns "no such file" into ErrGone.
func gone(pid int, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("procview: pid %d: %w", pid, ErrGone)
	}
	return fmt.Errorf("procview: pid %d: %w", pid, err)
}

// Children implements Table through /proc/PID/task/TID/children: a few
// small reads however large the process table is.
func (t *procTable) Children(pid int) ([]int, error) {
	if t.noChildren.Load() {
		return childrenIn(t, pid)
	}
	taskDir := filepath.Join(t.root, strconv.Itoa(pid), "task")
	tasks, err := readDirNames(taskDir)
	t.reads.Add(1)
	if err != nil {
		return nil, gone(pid, err)
	}
	bp := childBufs.Get().(*[]byte)
	defer childBufs.Put(bp)
	var out []int
	for _, tid := range tasks {
		b, err := readSmall(filepath.Join(taskDir, tid, "children"), (*bp)[:cap(*bp)])
		if cap(b) > cap(*bp) {
			*bp = b[:0] // keep the grown buffer for the next list
		}
		t.reads.Add(1)
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join(taskDir, tid)); serr == nil {
				// The thread is there but the file is not: this kernel
				// has no children lists.
				t.noChildren.Store(true)
				return childrenIn(t, pid)
			}
			continue // the thread ended since the listing
		}
		if err != nil {
			continue
		}
		out = appendPIDs(out, b)
	}
	return out, nil
}

// childrenIn finds pid's children by listing the whole table t (macOS
// keeps no cheap per-process list; Linux falls back to it).
func childrenIn(t Table, pid int) ([]int, error) {
	all, err := t.List()
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(all, func(p Process) bool { return p.PID == pid }) {
		return nil, fmt.Errorf("procview: pid %d: %w", pid, ErrGone)
	}
	var out []int
	for _, p := range all {
		if p.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out, nil
}

// appendPIDs parses a children list ("12 345 6789 "): it is read on
// every scan, so by hand.
func appendPIDs(out []int, b []byte) []int {
	out = slices.Grow(out, len(b)/6)
	n, digits, bad := 0, false, false
	for _, c := range b {
		if c >= '0' && c <= '9' {
			n = n*10 + int(c-'0')
			digits = true
			bad = bad || n > 1<<31 // no pid is that large
			continue
		}
		if digits && !bad && n > 0 {
			out = append(out, n)
		}
		n, digits, bad = 0, false, false
	}
	if digits && !bad && n > 0 {
		out = append(out, n)
	}
	return out
}

// childBufs hold the buffers children lists are read into: a list of
// 10,000 children is 60 KB, read every scan.
var childBufs = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}
