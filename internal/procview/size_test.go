package procview

import (
	"testing"
)

// The servers of 1,000 directories × 10 configured alike (the daemon's
// scale benchmark) are indexed, not copied: the view holds well under
// 1 MiB for them beyond the caller's list (a copy of the list is about
// 1 MiB, a string key per server in the index 1 MiB more). Setting them
// again with one directory more indexes the servers again but resolves
// only the new directory, and an equal list (the engine lists its
// servers again after every config read) builds nothing.
func TestServersAtScaleAreIndexedNotCopied(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 servers")
	}
	const liveLimit, armedAllocs = 1 << 20, 8000
	servers := alikeServers(benchDirs, benchPerDir)
	fewer := servers[:len(servers)-benchPerDir]
	tab := newMemTable(Process{PID: 100, PPID: 1, UID: ana, Argv: []string{"opencode", "serve"}, Cwd: "/"})
	if live := liveBytes(func() any { return newView(t, tab, 100, servers) }); live > liveLimit {
		t.Errorf("the view holds %d KiB for %d servers, want at most %d KiB: a copy of the servers, or a key per server, is back", live>>10, len(servers), liveLimit>>10)
	}
	v := newView(t, tab, 100, fewer)
	if n := testing.AllocsPerRun(3, func() { v.SetServers(servers); v.SetServers(fewer) }); n > 2*armedAllocs {
		t.Errorf("setting %d servers again with one directory more allocates %.0f times, want at most %d", len(servers), n/2, armedAllocs)
	}
	again := append([]LocalServer(nil), fewer...)
	if n := testing.AllocsPerRun(3, func() { v.SetServers(again); v.SetServers(fewer) }); n != 0 {
		t.Errorf("setting %d equal servers again allocates %.0f times, want none: the matcher was built again", len(fewer), n/2)
	}
}
