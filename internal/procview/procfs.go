package procview

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// plus the start ticks.
	boot time.Time
	// noChildren is set once task/TID/children turned out to be missing
	// (a kernel without CONFIG_PROC_CHILDREN): Children then filters List.
	noChildren atomic.Bool
	// reads counts the files and directories read, for the benchmarks.
	reads atomic.Int64
}

// ProcFS reads the /proc tree mounted or recorded at root.
func ProcFS(root string) (Table, error) {
	return newProcTable(root)
}

func newProcTable(root string) (*procTable, error) {
	pfs, err := procfs.NewFS(root)
	if err != nil {
		return nil, fmt.Errorf("procview: %s: %w", root, err)
	}
	st, err := pfs.Stat()
	if err != nil {
		return nil, fmt.Errorf("procview: %s/stat: %w", root, err)
	}
	return &procTable{root: root, fs: pfs, boot: time.Unix(int64(st.BootTime), 0)}, nil
}

// List implements Table.
func (t *procTable) List() ([]Process, error) {
	procs, err := t.fs.AllProcs()
	t.reads.Add(1)
	if err != nil {
		return nil, fmt.Errorf("procview: list %s: %w", t.root, err)
	}
	out := make([]Process, 0, len(procs))
	for _, p := range procs {
		st, err := p.Stat()
		t.reads.Add(1)
		if err != nil {
			continue // it exited since the listing
		}
		out = append(out, t.fromStat(st))
	}
	return out, nil
}

func (t *procTable) fromStat(st procfs.ProcStat) Process {
	return Process{
		PID:    st.PID,
		PPID:   st.PPID,
		PGID:   st.PGRP,
		UID:    -1,
		Zombie: st.State == "Z" || st.State == "X",
		Birth:  st.Starttime,
		Start:  t.boot.Add(time.Duration(st.Starttime) * (time.Second / userHZ)),
		Comm:   st.Comm,
	}
}

// Stat implements Table.
func (t *procTable) Stat(pid int) (Process, error) {
	_, out, err := t.stat(pid)
	return out, err
}

func (t *procTable) stat(pid int) (procfs.Proc, Process, error) {
	p, err := t.fs.Proc(pid)
	t.reads.Add(1)
	if err != nil {
		return p, Process{}, gone(pid, err)
	}
	st, err := p.Stat()
	t.reads.Add(1)
	if err != nil {
		return p, Process{}, gone(pid, err)
	}
	return p, t.fromStat(st), nil
}

// Read implements Table.
func (t *procTable) Read(pid int) (Process, error) {
	p, out, err := t.stat(pid)
	if err != nil {
		return Process{}, err
	}
	status, err := p.NewStatus()
	t.reads.Add(1)
	if err != nil {
		return Process{}, gone(pid, err)
	}
	out.UID = int(status.UIDs[0])
	argv, err := p.CmdLine()
	t.reads.Add(1)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Process{}, gone(pid, err)
	case err == nil && len(argv) > 0:
		out.Argv = argv
	}
	// Unreadable for another user's process and for a zombie: left "".
	out.Cwd, _ = p.Cwd()
	t.reads.Add(1)
	out.Cwd = strings.TrimSuffix(out.Cwd, " (deleted)")
	return out, nil
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
		return t.childrenByList(pid)
	}
	taskDir := filepath.Join(t.root, strconv.Itoa(pid), "task")
	tasks, err := readDirNames(taskDir)
	t.reads.Add(1)
	if err != nil {
		return nil, gone(pid, err)
	}
	var out []int
	for _, tid := range tasks {
		b, err := os.ReadFile(filepath.Join(taskDir, tid, "children"))
		t.reads.Add(1)
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join(taskDir, tid)); serr == nil {
				// The thread is there but the file is not: this kernel
				// has no children lists.
				t.noChildren.Store(true)
				return t.childrenByList(pid)
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

// childrenByList finds pid's children in the whole table: the fallback.
func (t *procTable) childrenByList(pid int) ([]int, error) {
	all, err := t.List()
	if err != nil {
		return nil, err
	}
	var out []int
	found := false
	for _, p := range all {
		if p.PID == pid {
			found = true
		}
		if p.PPID == pid {
			out = append(out, p.PID)
		}
	}
	if !found {
		return nil, fmt.Errorf("procview: pid %d: %w", pid, ErrGone)
	}
	return out, nil
}

// appendPIDs parses a children list ("12 345 6789 ").
func appendPIDs(out []int, b []byte) []int {
	for len(b) > 0 {
		var f []byte
		i := bytes.IndexByte(b, ' ')
		if i < 0 {
			f, b = b, nil
		} else {
			f, b = b[:i], b[i+1:]
		}
		f = bytes.TrimSpace(f)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.Atoi(string(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
