package procview

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Buffers laid out as macOS hands them out (testdata/darwin, rewritten by
// -update from the builders below). They are built to the kernel's
// layouts, not recorded on a Mac: none runs here.

func buildProcArgs2(exe string, argv, env []string) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, int32(len(argv)))
	b.WriteString(exe)
	b.WriteByte(0)
	// The kernel pads the exec path to a word boundary with NULs.
	for b.Len()%8 != 0 {
		b.WriteByte(0)
	}
	b.Write(make([]byte, 8))
	for _, s := range append(slices.Clone(argv), env...) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	b.WriteString("ptr_munge=\x00main_stack=\x00executable_file=0x1a01000009,0x4d3f2\x00")
	return b.Bytes()
}

type kinfoSpec struct {
	pid, ppid, pgid, ruid int
	stat                  int8
	start                 time.Time
	comm                  string
}

func buildKinfo(specs ...kinfoSpec) []byte {
	le := binary.LittleEndian
	out := make([]byte, 0, len(specs)*kinfoSize)
	for _, s := range specs {
		k := make([]byte, kinfoSize)
		le.PutUint64(k[kinfoStartSec:], uint64(s.start.Unix()))
		le.PutUint32(k[kinfoStartUsec:], uint32(s.start.Nanosecond()/1000))
		k[kinfoStat] = byte(s.stat)
		le.PutUint32(k[kinfoPID:], uint32(s.pid))
		copy(k[kinfoComm:kinfoComm+kinfoCommLen-1], s.comm)
		le.PutUint32(k[kinfoRUID:], uint32(s.ruid))
		le.PutUint32(k[420:], uint32(s.ruid)) // kp_eproc.e_ucred.cr_uid
		le.PutUint32(k[kinfoPPID:], uint32(s.ppid))
		le.PutUint32(k[kinfoPGID:], uint32(s.pgid))
		out = append(out, k...)
	}
	return out
}

func buildVnodePathInfo(cwd, root string) []byte {
	b := make([]byte, vnodePathInfoSize)
	copy(b[vnodeInfoSize:], cwd)
	copy(b[2*vnodeInfoSize+maxPathLen:], root)
	return b
}

var darwinStart = time.Date(2026, 11, 30, 9, 15, 2, 123456000, time.UTC)

func darwinFixtures() map[string][]byte {
	return map[string][]byte{
		"procargs2-node.bin": buildProcArgs2("/opt/homebrew/bin/node",
			[]string{"node", "/Users/ana/my projéct/srv.js", "--name", "café au lait"},
			[]string{"GITHUB_TOKEN=ghp_shouldneverbeseen0123456789", "PATH=/usr/bin:/bin"}),
		"procargs2-empty-arg.bin": buildProcArgs2("/bin/sh", []string{"sh", "-c", ""}, nil),
		"kern.proc.all.bin": buildKinfo(
			kinfoSpec{pid: 1, ppid: 0, pgid: 1, ruid: 0, stat: 2, start: darwinStart.Add(-time.Hour), comm: "launchd"},
			kinfoSpec{pid: 812, ppid: 1, pgid: 812, ruid: 501, stat: 2, start: darwinStart, comm: "opencode"},
			kinfoSpec{pid: 813, ppid: 812, pgid: 812, ruid: 501, stat: 3, start: darwinStart.Add(time.Second), comm: "node"},
			kinfoSpec{pid: 814, ppid: 812, pgid: 812, ruid: 501, stat: darwinStatusZombie, start: darwinStart.Add(2 * time.Second), comm: "a very long name"},
		),
		"vnodepathinfo.bin": buildVnodePathInfo("/Users/ana/my projéct", "/"),
	}
}

func TestDarwinFixtures(t *testing.T) {
	dir := filepath.Join("testdata", "darwin")
	for name, want := range darwinFixtures() {
		path := filepath.Join(dir, name)
		if *update {
			must(t, os.MkdirAll(dir, 0o755))
			must(t, os.WriteFile(path, want, 0o644))
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale: go test -run TestDarwinFixtures -update", path)
		}
	}
}

func readFixture(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "darwin", name))
	must(t, err)
	return b
}

// argv comes out whole, spaces and unicode included; the environment
// after it never does.
func TestParseProcArgs2(t *testing.T) {
	exe, argv, err := parseProcArgs2(readFixture(t, "procargs2-node.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if exe != "/opt/homebrew/bin/node" || !slices.Equal(argv, []string{"node", "/Users/ana/my projéct/srv.js", "--name", "café au lait"}) {
		t.Fatalf("exe %q argv %q", exe, argv)
	}
	if strings.Contains(strings.Join(argv, " "), "ghp_") {
		t.Fatal("the environment leaked into argv")
	}
	_, argv, err = parseProcArgs2(readFixture(t, "procargs2-empty-arg.bin"))
	if err != nil || !slices.Equal(argv, []string{"sh", "-c", ""}) {
		t.Fatalf("argv %q, %v", argv, err)
	}
	full := readFixture(t, "procargs2-node.bin")
	for _, bad := range [][]byte{nil, {1, 0}, full[:20], {0xff, 0xff, 0xff, 0xff, 'x', 0}, {9, 0, 0, 0, '/', 'x'}} {
		if _, _, err := parseProcArgs2(bad); !errors.Is(err, errArgs) {
			t.Errorf("parseProcArgs2(%q) = %v, want errArgs", bad, err)
		}
	}
}

func TestParseKinfoProcs(t *testing.T) {
	ps, err := parseKinfoProcs(readFixture(t, "kern.proc.all.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 {
		t.Fatalf("%d processes", len(ps))
	}
	oc := ps[1]
	if oc.PID != 812 || oc.PPID != 1 || oc.PGID != 812 || oc.UID != 501 || oc.Zombie || oc.Comm != "opencode" || !IsOpenCode(oc) {
		t.Fatalf("opencode read as %+v", oc)
	}
	if !oc.Start.Equal(darwinStart) || oc.Birth != uint64(darwinStart.Unix())*1e6+123456 {
		t.Fatalf("start %v birth %d", oc.Start, oc.Birth)
	}
	if z := ps[3]; !z.Zombie || z.Comm != "a very long name" || z.PPID != 812 {
		t.Fatalf("zombie read as %+v", z)
	}
	if _, err := parseKinfoProcs(make([]byte, kinfoSize+1)); err == nil {
		t.Fatal("a buffer of no whole kinfo_proc was accepted")
	}
	if ps, err := parseKinfoProcs(nil); err != nil || len(ps) != 0 {
		t.Fatalf("empty: %v %v", ps, err)
	}
}

func TestParseVnodePathInfo(t *testing.T) {
	cwd, err := parseVnodePathInfo(readFixture(t, "vnodepathinfo.bin"))
	if err != nil || cwd != "/Users/ana/my projéct" {
		t.Fatalf("cwd %q, %v", cwd, err)
	}
	if _, err := parseVnodePathInfo(make([]byte, 100)); err == nil {
		t.Fatal("a short buffer was accepted")
	}
	full := make([]byte, vnodePathInfoSize)
	for i := range full {
		full[i] = 'a'
	}
	if _, err := parseVnodePathInfo(full); err == nil {
		t.Fatal("a path without NUL was accepted")
	}
}

func FuzzParseProcArgs2(f *testing.F) {
	for _, name := range []string{"procargs2-node.bin", "procargs2-empty-arg.bin"} {
		b, err := os.ReadFile(filepath.Join("testdata", "darwin", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{2, 0, 0, 0, 'x', 0, 'a', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		exe, argv, err := parseProcArgs2(b)
		if err != nil {
			return
		}
		n := int(int32(binary.LittleEndian.Uint32(b)))
		if len(argv) != n {
			t.Fatalf("argc %d, %d args", n, len(argv))
		}
		if len(exe)+len(strings.Join(argv, "")) > len(b) {
			t.Fatal("read past the buffer")
		}
	})
}

func FuzzParseKinfoProcs(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "darwin", "kern.proc.all.bin"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:kinfoSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := parseKinfoProcs(b)
		if err == nil && len(ps) != len(b)/kinfoSize {
			t.Fatalf("%d processes from %d bytes", len(ps), len(b))
		}
	})
}

func FuzzParseVnodePathInfo(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "darwin", "vnodepathinfo.bin"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := parseVnodePathInfo(b); err == nil && strings.ContainsRune(p, 0) {
			t.Fatal("a NUL in the path")
		}
	})
}
