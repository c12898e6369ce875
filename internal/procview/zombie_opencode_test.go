package procview

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// zombieOpenCode is OpenCode 2000 killed and not yet reaped by its
// parent: still in the table, state Z, leading its group 2000. Its
// children were handed to init at its exit.
func zombieOpenCode() Process {
	return Process{PID: 2000, PPID: 1999, PGID: 2000, UID: ana, Zombie: true, Birth: goneOpenCode.Birth, Start: goneOpenCode.Start, Comm: "opencode"}
}

// A zombie runs nothing: an OpenCode killed and not yet reaped by its
// parent (a shell that is busy, a supervisor that waits later) is gone
// for every piece of evidence. Its OPENCODE_PID proves the orphan, and so
// does the group it led, and the reaper ends the orphan.
func TestOrphanOfAZombieOpenCodeIsProven(t *testing.T) {
	withEnv := func(tab *memTable) { tab.setEnv(3000, "OPENCODE_PID", "2000") }
	for name, c := range map[string]struct {
		evidence func(*memTable)
		record   []Sightings
		want     Evidence
		words    string
	}{
		"OPENCODE_PID": {withEnv, nil, EnvOfGoneOpenCode, "OpenCode pid 2000 (its OPENCODE_PID and its process group), which is gone"},
		"group":        {nil, []Sightings{{OpenCode: goneOpenCode, Boot: testBoot}}, GroupOfGoneOpenCode, "process group of OpenCode pid 2000"},
		"record":       {nil, []Sightings{{OpenCode: goneOpenCode, Boot: testBoot, Seen: []Sighting{seen3000}}}, SeenUnderOpenCode, "under OpenCode pid 2000"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tab := evidenceTable(2000)
				if c.evidence != nil {
					c.evidence(tab)
				}
				tab.put(zombieOpenCode())
				s := Scope{UID: ana, Record: c.record}
				o := orphanOf(t, tab, s)
				if o.Evidence != c.want || !strings.Contains(o.Why, c.words) {
					t.Fatalf("the orphan of a zombie OpenCode: %v (%s), want %v", o.Evidence, o.Why, c.want)
				}
				var log []sent
				r := Reaper{Table: tab, Scope: s, signal: fakeSignal(tab, &log, true)}
				if res, err := r.Reap(context.Background(), o); err != nil || res.Signal != syscall.SIGTERM || !slices.Equal(log, []sent{{3000, syscall.SIGTERM}}) {
					t.Fatalf("reap = %+v, %v; sent %v", res, err, log)
				}
			})
		})
	}
}

// A zombie proves only what its identity proves. In the group of a
// recorded OpenCode, the zombie that holds the group's id must be that
// very OpenCode (or its run wrapper): a zombie with the id is otherwise
// the leader of a new group that got the pid after the recorded one was
// gone (a setsid job of a later boot whose shell exited). And a zombie
// OpenCode reaped during the scan leaves the orphan proven all the same.
func TestZombieAtTheGroupIDProvesOnlyAsTheRecordedLeader(t *testing.T) {
	tab := evidenceTable(2000)
	record := []Sightings{{OpenCode: goneOpenCode, Boot: testBoot}}
	other := zombieOpenCode()
	other.Birth, other.Start, other.Comm = 2500, goneOpenCode.Start.Add(30*time.Minute), "sh"
	tab.put(other)
	if o := orphanOf(t, tab, Scope{UID: ana, Record: record}); o.Evidence.Proven() {
		t.Fatalf("a zombie that is not the recorded OpenCode, at its group's id, proved it: %v (%s)", o.Evidence, o.Why)
	}

	// OPENCODE_PID: the process at that pid while the orphan is in its
	// group can only be the leader that made the group (its pid cannot
	// be handed out while the group exists), zombie or not; reaped by
	// now, it is gone as well.
	tab.setEnv(3000, "OPENCODE_PID", "2000")
	for _, step := range []func(){func() { tab.put(zombieOpenCode()) }, func() { tab.remove(2000) }} {
		step()
		if o := orphanOf(t, tab, Scope{UID: ana}); o.Evidence != EnvOfGoneOpenCode {
			t.Fatalf("evidence %v (%s)", o.Evidence, o.Why)
		}
	}

	// A live OpenCode at that pid still runs: never proven.
	live := zombieOpenCode()
	live.Zombie = false
	tab.put(live)
	if o := orphanOf(t, tab, Scope{UID: ana}); o.Evidence.Proven() || !strings.Contains(o.Why, "still runs") {
		t.Fatalf("the child of a live OpenCode: %v (%s)", o.Evidence, o.Why)
	}
}

// A hostile reviewer's cases. The zombie OpenCode that leads the
// orphan's group is reaped between the listing and the signal: the
// reaper's check right before the signal finds the group's id free, and
// the orphan still proven. A record from a previous boot, whose pid and
// birth a zombie of this boot has (pids and ticks start over), proves
// nothing: the zombie started on this boot, so it is not the recorded
// OpenCode, and that OpenCode ran before this boot began.
func TestZombieOpenCodeReapedMidwayOrOfAnotherBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := evidenceTable(2000)
		tab.put(zombieOpenCode())
		s := Scope{UID: ana, Record: []Sightings{{OpenCode: goneOpenCode, Boot: testBoot}}}
		o := orphanOf(t, tab, s)
		if o.Evidence != GroupOfGoneOpenCode {
			t.Fatalf("evidence %v (%s)", o.Evidence, o.Why)
		}
		tab.remove(2000) // its parent reaped it meanwhile
		var log []sent
		r := Reaper{Table: tab, Scope: s, signal: fakeSignal(tab, &log, true)}
		if res, err := r.Reap(context.Background(), o); err != nil || res.Signal != syscall.SIGTERM || !slices.Equal(log, []sent{{3000, syscall.SIGTERM}}) {
			t.Fatalf("reap = %+v, %v; sent %v", res, err, log)
		}
	})

	tab := evidenceTable(2000)
	tab.bootID = "another boot" // the record is of testBoot
	tab.put(zombieOpenCode())   // pid 2000 with the recorded birth, of this boot
	for name, record := range map[string][]Sightings{
		"group":  {{OpenCode: goneOpenCode, Boot: testBoot}},
		"record": {{OpenCode: goneOpenCode, Boot: testBoot, Seen: []Sighting{seen3000}}},
	} {
		if o := orphanOf(t, tab, Scope{UID: ana, Record: record}); o.Evidence.Proven() {
			t.Errorf("%s: a record of the previous boot proved a process of this one through a zombie with its pid: %v (%s)", name, o.Evidence, o.Why)
		}
	}
}
