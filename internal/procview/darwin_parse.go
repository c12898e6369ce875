package procview

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The parsers of what macOS's kernel hands out. They live outside the
// darwin build tag so that the tests run them everywhere, on recorded and
// built buffers; the syscalls that fetch the buffers are in
// table_darwin.go. Every Mac Go supports (amd64, arm64) is 64-bit and
// little-endian, which the layouts below assume.

// kinfo_proc (sys/sysctl.h), as golang.org/x/sys/unix.KinfoProc lays it
// out on darwin/amd64 and darwin/arm64 (TestKinfoLayout pins the offsets
// to it on macOS).
const (
	kinfoSize          = 648
	kinfoStartSec      = 0   // kp_proc.p_starttime.tv_sec, int64
	kinfoStartUsec     = 8   // kp_proc.p_starttime.tv_usec, int32
	kinfoStat          = 36  // kp_proc.p_stat, int8
	kinfoPID           = 40  // kp_proc.p_pid, int32
	kinfoComm          = 243 // kp_proc.p_comm, [17]byte, NUL-terminated
	kinfoCommLen       = 17
	kinfoRUID          = 392 // kp_eproc.e_pcred.p_ruid, uint32
	kinfoPPID          = 560 // kp_eproc.e_ppid, int32
	kinfoPGID          = 564 // kp_eproc.e_pgid, int32
	darwinStatusZombie = 5   // SZOMB
)

// parseKinfoProcs reads the output of sysctl kern.proc.all: an array of
// kinfo_proc. UID is the real uid (known here, unlike in a /proc
// listing, but List leaves it to Read like every Table).
func parseKinfoProcs(raw []byte) ([]Process, error) {
	if len(raw)%kinfoSize != 0 {
		return nil, fmt.Errorf("procview: kern.proc.all: %d bytes is not a whole number of %d-byte kinfo_proc", len(raw), kinfoSize)
	}
	le := binary.LittleEndian
	out := make([]Process, 0, len(raw)/kinfoSize)
	for off := 0; off < len(raw); off += kinfoSize {
		k := raw[off : off+kinfoSize]
		sec := int64(le.Uint64(k[kinfoStartSec:]))
		usec := int64(int32(le.Uint32(k[kinfoStartUsec:])))
		comm, _, _ := bytes.Cut(k[kinfoComm:kinfoComm+kinfoCommLen], []byte{0})
		out = append(out, Process{
			PID:    int(int32(le.Uint32(k[kinfoPID:]))),
			PPID:   int(int32(le.Uint32(k[kinfoPPID:]))),
			PGID:   int(int32(le.Uint32(k[kinfoPGID:]))),
			UID:    int(le.Uint32(k[kinfoRUID:])),
			Zombie: int8(k[kinfoStat]) == darwinStatusZombie,
			Start:  time.Unix(sec, usec*1000),
			Birth:  uint64(sec)*1_000_000 + uint64(usec),
			Comm:   string(comm),
		})
	}
	return out, nil
}

// errArgs is a KERN_PROCARGS2 buffer that is not one.
var errArgs = errors.New("procview: malformed kern.procargs2 buffer")

// parseProcArgs2 reads a KERN_PROCARGS2 buffer: argc (int32), the path
// the program was executed by, NUL padding, argc NUL-terminated
// arguments, then the environment, which is never read.
func parseProcArgs2(buf []byte) (exe string, argv []string, err error) {
	exe, argv, _, err = splitProcArgs2(buf)
	return exe, retitled(argv), err
}

// splitProcArgs2 is parseProcArgs2 before retitling, and what follows
// the arguments: the environment.
func splitProcArgs2(buf []byte) (exe string, argv []string, env []byte, err error) {
	if len(buf) < 4 {
		return "", nil, nil, errArgs
	}
	argc := int(int32(binary.LittleEndian.Uint32(buf)))
	if argc < 0 || argc > len(buf) {
		return "", nil, nil, errArgs
	}
	rest := buf[4:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return "", nil, nil, errArgs
	}
	exe, rest = string(rest[:i]), bytes.TrimLeft(rest[i:], "\x00")
	argv = make([]string, 0, argc)
	for range argc {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			// Truncated: the kernel cuts the buffer at kern.argmax.
			return "", nil, nil, errArgs
		}
		argv = append(argv, string(rest[:i]))
		rest = rest[i+1:]
	}
	return exe, argv, rest, nil
}

// struct proc_vnodepathinfo (sys/proc_info.h): the working directory's
// vnode_info_path, then the root directory's. Each is a vnode_info (152
// bytes: vinfo_stat 136, vi_type, vi_pad, fsid_t) and a MAXPATHLEN path.
const (
	vnodeInfoSize     = 152
	maxPathLen        = 1024
	vnodePathInfoSize = 2 * (vnodeInfoSize + maxPathLen)
)

// parseVnodePathInfo reads the working directory out of the buffer that
// proc_pidinfo(pid, PROC_PIDVNODEPATHINFO) fills.
func parseVnodePathInfo(buf []byte) (string, error) {
	if len(buf) < vnodeInfoSize+maxPathLen {
		return "", fmt.Errorf("procview: proc_vnodepathinfo of %d bytes, want %d", len(buf), vnodePathInfoSize)
	}
	path := buf[vnodeInfoSize : vnodeInfoSize+maxPathLen]
	i := bytes.IndexByte(path, 0)
	if i < 0 {
		return "", errors.New("procview: proc_vnodepathinfo path is not NUL-terminated")
	}
	return string(path[:i]), nil
}

// procArgs2Env finds the variable name in a KERN_PROCARGS2 buffer: the
// environment follows the arguments there. Only that one variable is
// ever taken out of it.
func procArgs2Env(buf []byte, name string) (string, bool, error) {
	_, _, env, err := splitProcArgs2(buf)
	if err != nil {
		return "", false, err
	}
	return findEnv(bytes.NewReader(env), name)
}
