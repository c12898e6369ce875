package procview

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// The record is private: what another user could write (a file others
// may write, a file that names another OpenCode than its name says) is
// not evidence.
func TestRecordSavesLoadsAndPrunes(t *testing.T) {
	r := Record{Dir: filepath.Join(t.TempDir(), "processes")}
	boot := time.Unix(bootTime, 0)
	live := Ident{PID: 2000, Birth: 2000, Start: boot, PGID: 2000}
	gone := Ident{PID: 2100, Birth: 2100, Start: boot, PGID: 2100}
	must(t, r.Save(Sightings{OpenCode: live, Seen: []Sighting{{Ident: Ident{PID: 2001, Birth: 2001, Start: boot}, Parent: live, Directory: "/p", Server: "a"}}}))
	must(t, r.Save(Sightings{OpenCode: gone, Seen: []Sighting{{Ident: Ident{PID: 2101, Birth: 2101, Start: boot}, Parent: gone, Directory: "/p", Server: "b"}}}))
	fi, err := os.Stat(r.Dir)
	must(t, err)
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("record directory mode %v", fi.Mode())
	}
	// Foreign or forged files are skipped.
	must(t, os.WriteFile(filepath.Join(r.Dir, "3000-3000.json"), []byte(`{"opencode":{"pid":3000,"birth":3000}}`), 0o666))
	must(t, os.Chmod(filepath.Join(r.Dir, "3000-3000.json"), 0o666))
	must(t, os.WriteFile(filepath.Join(r.Dir, "4000-4000.json"), []byte(`{"opencode":{"pid":9,"birth":9}}`), 0o600))
	got, err := r.Load()
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("loaded %+v", got)
	}
	tab := newMemTable(Process{PID: 2000, Birth: 2000, Start: boot, PGID: 2000}, Process{PID: 2001, Birth: 2001, Start: boot})
	kept := r.Prune(tab, got)
	if len(kept) != 1 || kept[0].OpenCode.PID != 2000 {
		t.Fatalf("kept %+v", kept)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, recordName(gone))); !os.IsNotExist(err) {
		t.Fatalf("the file of an OpenCode that is gone with all its processes is still there: %v", err)
	}
	// A record directory others can enter is no evidence at all.
	must(t, os.Chmod(r.Dir, 0o755))
	if _, err := r.Load(); err == nil {
		t.Fatal("a record directory others can read was read")
	}
}

// Pids and births start over at each boot: the record of an OpenCode of
// another boot is pruned even while a process of this boot has its pid
// and birth, and a process identity matches exactly (no start-time
// tolerance) within one boot.
func TestRecordOfAnotherBootIsPruned(t *testing.T) {
	r := Record{Dir: filepath.Join(t.TempDir(), "processes")}
	boot := time.Unix(bootTime, 0)
	oc := Ident{PID: 2000, Birth: 2000, Start: boot, PGID: 2000}
	must(t, r.Save(Sightings{OpenCode: oc, Boot: "a boot before this one"}))
	got, err := r.Load()
	must(t, err)
	tab := newMemTable(Process{PID: 2000, Birth: 2000, Start: boot.Add(72 * time.Hour), PGID: 2000})
	if kept := r.Prune(tab, got); len(kept) != 0 {
		t.Fatalf("a record of another boot was kept: %+v", kept)
	}
	if oc.is(Process{PID: 2000, Birth: 2001, Start: boot}) || !oc.is(Process{PID: 2000, Birth: 2000, Start: boot.Add(-time.Second)}) {
		t.Fatal("an identity is its pid and birth, exactly")
	}
}

// A child of the native binary under npm's node wrapper is recorded
// under that binary, the OpenCode that started it, not under the
// wrapper: the binary's end is what proves the child an orphan.
func TestRunRecordsTheWrappedOpenCodeAsParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boot := time.Unix(bootTime, 0)
		wrapped := Process{PID: 51, PPID: 50, PGID: 50, UID: ana, Birth: 51, Start: boot, Comm: "opencode", Argv: []string{"/usr/lib/node_modules/opencode-linux-x64/bin/opencode"}, Cwd: "/p"}
		tab := newMemTable(
			Process{PID: 50, PPID: 1, PGID: 50, UID: ana, Birth: 50, Start: boot, Comm: "node", Argv: []string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, Cwd: "/p"},
			wrapped,
			Process{PID: 52, PPID: 51, PGID: 50, UID: ana, Birth: 52, Start: boot, Comm: "srv", Argv: []string{"srv", "a"}, Cwd: "/p"},
		)
		v := newView(t, tab, 50, simpleServers())
		rec := Record{Dir: filepath.Join(t.TempDir(), "processes")}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- v.Run(ctx, nil, Options{Record: &rec}) }()
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		must(t, <-done)
		all, err := rec.Load()
		if err != nil || len(all) != 1 || len(all[0].Seen) != 1 {
			t.Fatalf("record %+v, %v", all, err)
		}
		if x := all[0].Seen[0]; x.PID != 52 || x.Server != "a" || !x.Parent.is(wrapped) {
			t.Fatalf("recorded %+v, want pid 52 serving a under %+v", x, IdentOf(wrapped))
		}
	})
}
