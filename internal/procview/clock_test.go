package procview

import (
	"fmt"
	"os"
	"testing"
)

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
