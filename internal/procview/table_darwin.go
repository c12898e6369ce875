//go:build darwin

package procview

import (
	"errors"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// System reads this Mac's process table: sysctl kern.proc.all for the
// list, kern.proc.pid and kern.procargs2 for one process, and the
// proc_info system call (what libproc's proc_pidinfo makes) for its
// working directory. No cgo.
func System() (Table, error) { return sysctlTable{}, nil }

type sysctlTable struct{}

// Now implements Table: a process's Birth is its start time
// (p_starttime, the wall clock in microseconds at its fork), so the clock
// is the wall clock, in microseconds, truncated alike.
func (sysctlTable) Now() uint64 { return uint64(time.Now().UnixMicro()) }

// BootID implements Table: kern.bootsessionuuid ("" when unreadable).
func (sysctlTable) BootID() string {
	id, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return ""
	}
	return id
}

// List implements Table.
func (sysctlTable) List() ([]Process, error) {
	var raw []byte
	var err error
	// The table can grow between sizing the buffer and filling it.
	for range 5 {
		raw, err = unix.SysctlRaw("kern.proc.all")
		if !errors.Is(err, unix.ENOMEM) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("procview: sysctl kern.proc.all: %w", err)
	}
	ps, err := parseKinfoProcs(raw)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		ps[i].UID = -1 // the Table contract: List leaves the uid to Read
	}
	return ps, nil
}

// Stat implements Table.
func (sysctlTable) Stat(pid int) (Process, error) {
	p, err := kinfoOf(pid)
	p.UID = -1
	return p, err
}

// kinfoOf reads one process's kinfo_proc.
func kinfoOf(pid int) (Process, error) {
	raw, err := unix.SysctlRaw("kern.proc.pid", pid)
	if err != nil {
		return Process{}, fmt.Errorf("procview: sysctl kern.proc.pid.%d: %w", pid, err)
	}
	if len(raw) == 0 {
		return Process{}, fmt.Errorf("procview: pid %d: %w", pid, ErrGone)
	}
	ps, err := parseKinfoProcs(raw)
	if err != nil || len(ps) != 1 {
		return Process{}, fmt.Errorf("procview: sysctl kern.proc.pid.%d: %d bytes", pid, len(raw))
	}
	return ps[0], nil
}

// Read implements Table.
func (sysctlTable) Read(pid int) (Process, error) {
	p, err := kinfoOf(pid)
	if err != nil {
		return Process{}, err
	}
	// EINVAL for another user's process and for a zombie: Argv stays nil.
	if buf, err := unix.SysctlRaw("kern.procargs2", pid); err == nil {
		if _, argv, err := parseProcArgs2(buf); err == nil {
			p.Argv = argv
		}
	}
	p.Cwd, _ = cwdOf(pid)
	return p, nil
}

// Env implements EnvReader from kern.procargs2, whose buffer holds the
// environment after the arguments (EINVAL for another user's process).
func (sysctlTable) Env(pid int, name string) (string, bool, error) {
	buf, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return "", false, fmt.Errorf("procview: sysctl kern.procargs2.%d: %w", pid, err)
	}
	return procArgs2Env(buf, name)
}

// Children implements Table: macOS keeps no per-process list of
// children that is cheap to read, so it filters the whole table (one
// sysctl).
func (t sysctlTable) Children(pid int) ([]int, error) { return childrenIn(t, pid) }

// proc_info(2) call and flavor numbers (sys/proc_info.h).
const (
	procInfoCallPidinfo  = 2
	procPidVnodePathInfo = 9
)

// cwdOf asks the kernel for pid's working directory the way
// proc_pidinfo(pid, PROC_PIDVNODEPATHINFO, 0, buf, size) does: EPERM for
// another user's process, ESRCH for one that is gone.
func cwdOf(pid int) (string, error) {
	buf := make([]byte, vnodePathInfoSize)
	n, _, errno := unix.Syscall6(unix.SYS_PROC_INFO, procInfoCallPidinfo, uintptr(pid),
		procPidVnodePathInfo, 0, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if errno != 0 {
		return "", errno
	}
	if int(n) < vnodeInfoSize+maxPathLen {
		return "", syscall.EIO
	}
	return parseVnodePathInfo(buf[:n])
}
