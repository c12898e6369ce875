package procview

import (
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openTable(t testing.TB, root string) *procTable {
	t.Helper()
	pt, err := newProcTable(root)
	if err != nil {
		t.Fatal(err)
	}
	return pt
}

// The recorded tree of a real `opencode serve` 1.18.34 (testdata/README.md)
// reads as it was: a direct child per local server, argv exactly the
// configured command, cwd the directory or the configured cwd.
func TestReadRecordedOpenCode(t *testing.T) {
	pt := openTable(t, filepath.Join("testdata", "opencode-1.18.34"))
	oc, err := pt.Read(21276)
	if err != nil {
		t.Fatal(err)
	}
	if !IsOpenCode(oc) || oc.PPID != 21274 || oc.UID != 0 || oc.Zombie || oc.Cwd != "/tmp/procx/home" {
		t.Fatalf("opencode read as %+v", oc)
	}
	if want := time.Unix(bootTime, 0).Add(881950 * time.Millisecond); !oc.Start.Equal(want) || oc.Birth != 88195 {
		t.Fatalf("start %v birth %d, want %v 88195", oc.Start, oc.Birth, want)
	}
	kids, err := pt.Children(21276)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{21496, 21506, 21919, 21929}; !slices.Equal(kids, want) {
		t.Fatalf("children %v, want %v", kids, want)
	}
	p, err := pt.Read(21496)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"../mcpserver", "-transport", "stdio", "-name", "Authorization: Bearer sekrit"}; !slices.Equal(p.Argv, want) || p.Cwd != "/tmp/procx/my projéct/sub dir" {
		t.Fatalf("child read as argv %q cwd %q", p.Argv, p.Cwd)
	}
	if d := Display(p.Argv); d != "../mcpserver -transport stdio -name 'Authorization: ***'" {
		t.Fatalf("Display = %q", d)
	}
}

// The synthetic tree: a zombie, a process that vanished from the listing
// and one that vanished while being read, unicode and spaces everywhere.
func TestReadSynthetic(t *testing.T) {
	pt := openTable(t, filepath.Join("testdata", "synthetic"))
	kids, err := pt.Children(2000)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{2100, 2101, 2102, 2103, 2105, 2106, 2107, 2104}; !slices.Equal(kids, want) {
		t.Fatalf("children of 2000 = %v, want %v (listed on its Worker thread)", kids, want)
	}
	z, err := pt.Read(2103)
	if err != nil || !z.Zombie || z.Argv != nil || z.Cwd != "" {
		t.Fatalf("zombie read as %+v, %v", z, err)
	}
	for _, pid := range []int{2104, 2105, 77777} {
		if _, err := pt.Read(pid); !errors.Is(err, ErrGone) {
			t.Errorf("Read(%d) = %v, want ErrGone", pid, err)
		}
	}
	if _, err := pt.Children(77777); !errors.Is(err, ErrGone) {
		t.Errorf("Children of a missing pid = %v, want ErrGone", err)
	}
	p, err := pt.Read(2107)
	if err != nil {
		t.Fatal(err)
	}
	if p.Comm != "my srv (x) ü" || !slices.Equal(p.Argv, []string{"bash", "-c", "rg 'ünï code' | head"}) || p.Cwd != project {
		t.Fatalf("read %+v", p)
	}
	all, err := pt.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 17 { // 18 directories, one without stat
		t.Fatalf("List gave %d processes, want 17", len(all))
	}
	for _, p := range all {
		if p.UID != -1 || p.Argv != nil || p.Cwd != "" {
			t.Fatalf("List filled more than the cheap facts: %+v", p)
		}
	}
}

// A kernel without children lists (CONFIG_PROC_CHILDREN off): Children
// falls back to the whole table, with the same answer.
func TestChildrenWithoutChildrenFiles(t *testing.T) {
	root := t.TempDir()
	writeSynthetic(t, root)
	must(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "children" {
			return os.Remove(p)
		}
		return err
	}))
	pt := openTable(t, root)
	kids, err := pt.Children(2000)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{2100, 2101, 2102, 2103, 2106, 2107}; !slices.Equal(sorted(kids), want) {
		t.Fatalf("children = %v, want %v", kids, want)
	}
	if !pt.noChildren.Load() {
		t.Fatal("the fallback was not remembered")
	}
}

func sorted(s []int) []int { s = slices.Clone(s); slices.Sort(s); return s }

// The live table (/proc): this test process reads
// as itself.
func TestSystemReadsSelf(t *testing.T) {
	tab, err := System()
	if err != nil {
		t.Fatal(err)
	}
	me, err := tab.Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if me.PPID != os.Getppid() || me.UID != os.Getuid() || me.Cwd != physical(wd) || len(me.Argv) == 0 || me.Argv[0] != os.Args[0] {
		t.Fatalf("read self as %+v", me)
	}
	if d := time.Since(me.Start); d < 0 || d > time.Hour {
		t.Fatalf("started %v ago", d)
	}
}

func TestAppendPIDs(t *testing.T) {
	for in, want := range map[string][]int{
		"":                    nil,
		"12 345 6789 ":        {12, 345, 6789},
		"  7  8\n":            {7, 8},
		"0 x5 9":              {5, 9},
		"99999999999999999 3": {3},
	} {
		if got := appendPIDs(nil, []byte(in)); !slices.Equal(got, want) {
			t.Errorf("appendPIDs(%q) = %v, want %v", in, got, want)
		}
	}
}

// A process names itself (comm) as it likes: parentheses, spaces and a
// fake state inside it do not move the fields after it.
func TestParseStat(t *testing.T) {
	line := "4242 (x) Z 1 (y) S 77 4242 4242 0 -1 4194304 639 0 0 0 0 0 0 0 20 0 8 0 89388 1828069376 2486\n"
	p, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != 4242 || p.Comm != "x) Z 1 (y" || p.Zombie || p.PPID != 77 || p.PGID != 4242 || p.Birth != 89388 {
		t.Fatalf("parsed %+v", p)
	}
	for _, bad := range []string{"", "12 (x)", "12 (x) S 1 2", "x (y) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", "12 (x) SS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	for _, dir := range []string{"testdata/synthetic/2107", "testdata/opencode-1.18.34/21276"} {
		b, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("1 ()) R 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 7"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseStat(b)
		if err == nil && (strings.Count(string(b), "(") == 0 || len(p.Comm) > len(b)) {
			t.Fatalf("parsed %+v from %q", p, b)
		}
	})
}

func TestParseUIDAndCmdline(t *testing.T) {
	if uid, err := parseUID([]byte("Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t5\n")); err != nil || uid != 1000 {
		t.Fatalf("uid %d %v", uid, err)
	}
	if _, err := parseUID([]byte("Name:\tx\n")); err == nil {
		t.Fatal("status without Uid accepted")
	}
	if got := parseCmdline([]byte("sh\x00-c\x00\x00")); !slices.Equal(got, []string{"sh", "-c", ""}) {
		t.Fatalf("cmdline %q", got)
	}
	if parseCmdline(nil) != nil {
		t.Fatal("an empty cmdline is not nil")
	}
}

// A recorded tree's clock is its uptime file; without one, 0.
func TestNowOfARecordedTree(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, nil, nil)
	if n := openTable(t, root).Now(); n != 0 {
		t.Fatalf("Now without uptime = %d", n)
	}
	must(t, os.WriteFile(root+"/uptime", []byte("88195.37 170000.12\n"), 0o644))
	if n := openTable(t, root).Now(); n != 8819537 {
		t.Fatalf("Now = %d, want 8819537", n)
	}
	for in, want := range map[string]uint64{"0.00 0.00": 0, "12.3 4.00": 0, "12 4.00": 0, "x.00 1.00": 0, "12.345 1": 0, "": 0, "7.05": 705, "18446744073709551615.00 0": 0} {
		if got := parseUptime([]byte(in)); got != want {
			t.Errorf("parseUptime(%q) = %d, want %d", in, got, want)
		}
	}
}

func FuzzParseUptime(f *testing.F) {
	f.Add([]byte("88195.37 170000.12\n"))
	f.Add([]byte("0.00 0.00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := parseUptime(b)
		var s, c uint64
		if _, err := fmt.Sscanf(string(b), "%d.%d", &s, &c); n != 0 && (err != nil || n != s*userHZ+c) {
			t.Fatalf("parseUptime(%q) = %d", b, n)
		}
	})
}

// The group of a recorded OpenCode proves only members born before its
// recorded end, on the table's clock; and nothing when the record does
// not say which boot it is of.
func TestGroupEvidenceOnTheTablesClock(t *testing.T) {
	tab := evidenceTable(2000) // 3000 in group 2000, born at tick 3000
	for _, c := range []struct {
		name   string
		record Sightings
		proven bool
	}{
		{"ended after its birth", Sightings{OpenCode: goneOpenCode, Boot: testBoot, End: 3001}, true},
		{"ended at its birth", Sightings{OpenCode: goneOpenCode, Boot: testBoot, End: 3000}, false},
		{"ended before its birth", Sightings{OpenCode: goneOpenCode, Boot: testBoot, End: 2999}, false},
		{"end not seen", Sightings{OpenCode: goneOpenCode, Boot: testBoot}, true},
		{"no boot on record", Sightings{OpenCode: goneOpenCode, End: 3001}, false},
		{"another boot", Sightings{OpenCode: goneOpenCode, Boot: "another", End: 3001}, false},
	} {
		o := orphanOf(t, tab, Scope{UID: ana, Record: []Sightings{c.record}})
		if o.Evidence.Proven() != c.proven {
			t.Errorf("%s: %v (%s), want proven %v", c.name, o.Evidence, o.Why, c.proven)
		}
	}
}
