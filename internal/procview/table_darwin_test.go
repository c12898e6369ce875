//go:build darwin

package procview

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The offsets parseKinfoProcs reads are those of x/sys's kinfo_proc.
func TestKinfoLayout(t *testing.T) {
	var k unix.KinfoProc
	e := unsafe.Offsetof(k.Eproc)
	for name, c := range map[string][2]uintptr{
		"size":      {unsafe.Sizeof(k), kinfoSize},
		"start sec": {unsafe.Offsetof(k.Proc.P_starttime) + unsafe.Offsetof(k.Proc.P_starttime.Sec), kinfoStartSec},
		"start us":  {unsafe.Offsetof(k.Proc.P_starttime) + unsafe.Offsetof(k.Proc.P_starttime.Usec), kinfoStartUsec},
		"stat":      {unsafe.Offsetof(k.Proc.P_stat), kinfoStat},
		"pid":       {unsafe.Offsetof(k.Proc.P_pid), kinfoPID},
		"comm":      {unsafe.Offsetof(k.Proc.P_comm), kinfoComm},
		"ruid":      {e + unsafe.Offsetof(k.Eproc.Pcred) + unsafe.Offsetof(k.Eproc.Pcred.P_ruid), kinfoRUID},
		"ppid":      {e + unsafe.Offsetof(k.Eproc.Ppid), kinfoPPID},
		"pgid":      {e + unsafe.Offsetof(k.Eproc.Pgid), kinfoPGID},
	} {
		if c[0] != c[1] {
			t.Errorf("%s at %d, parsed at %d", name, c[0], c[1])
		}
	}
}
