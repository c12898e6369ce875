package registry

import "golang.org/x/sys/unix"

// sZomb is p_stat of a process that exited and was not reaped
// (<sys/proc.h>: SIDL 1, SRUN 2, SSLEEP 3, SSTOP 4, SZOMB 5).
const sZomb = 5

// readProc reads pid's state and start time from the kernel's process
// table (sysctl kern.proc.pid, no cgo). The start is p_starttime in
// microseconds: recorded at fork, it never changes for a process.
func readProc(pid int) (procInfo, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return procInfo{}, err
	}
	if int(kp.Proc.P_pid) != pid {
		return procInfo{}, unix.ESRCH
	}
	start := kp.Proc.P_starttime
	return procInfo{exited: kp.Proc.P_stat == sZomb, start: uint64(start.Sec)*1_000_000 + uint64(start.Usec)}, nil
}
