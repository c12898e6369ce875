package procview

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/synthetic from syntheticProcs")

// The synthetic machine of testdata/synthetic: user ana (uid 1000) runs an
// OpenCode TUI (2000) in "/home/ana/my projéct", whose MCP children are
// listed under its Worker thread, beside orphans of an OpenCode that died,
// another OpenCode, another user, and a server ana runs by hand.
const (
	ana     = 1000
	project = "/home/ana/my projéct"
	other   = "/home/ana/other dir"
)

var (
	mySrv  = []string{"node", "srv.js", "--name", "café au lait"}
	ghCmd  = []string{"npx", "-y", "@modelcontextprotocol/server-github"}
	proxy  = []string{"/usr/local/bin/mcp-proxy", "--header", "Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123", "https://mcp.example.com/x"}
	ghArgv = []string{"node", "/usr/bin/npx", "-y", "@modelcontextprotocol/server-github"} // the kernel ran the npx script by its interpreter
)

func syntheticServers() []LocalServer {
	return []LocalServer{
		{Directory: project, Name: "my server", Command: mySrv},
		{Directory: project, Name: "gh", Command: ghCmd},
		{Directory: other, Name: "proxy", Command: proxy, Cwd: "sub dir"},
		{Directory: other, Name: "gh", Command: ghCmd},
	}
}

func syntheticProcs() ([]fakeProc, map[int][]int) {
	procs := []fakeProc{
		{PID: 1, PPID: 0, UID: 0, Start: 1, Argv: []string{"/sbin/init", "splash"}, Comm: "systemd", Cwd: "/"},
		{PID: 900, PPID: 1, UID: ana, Start: 900, Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Comm: "systemd", Cwd: "/"},
		{PID: 1000, PPID: 900, UID: ana, Start: 1000, Argv: []string{"-bash"}, Comm: "bash", Cwd: "/home/ana"},
		// The watched OpenCode: a TUI, its MCP children on the Worker thread.
		{PID: 2000, PPID: 1000, UID: ana, Start: 88000, Argv: []string{"/home/ana/.opencode/bin/opencode", "--port", "4096"}, Cwd: project, Threads: []int{2000, 2001, 2005}},
		{PID: 2100, PPID: 2000, UID: ana, Start: 89000, Argv: mySrv, Cwd: project},
		{PID: 2101, PPID: 2000, UID: ana, Start: 89001, Argv: ghArgv, Cwd: project},
		{PID: 2102, PPID: 2000, UID: ana, Start: 89002, Argv: proxy, Cwd: other + "/sub dir", Comm: "mcp-proxy"},
		{PID: 2103, PPID: 2000, UID: ana, Start: 89003, State: "Z", Comm: "node"}, // other dir's gh: exited, not yet reaped
		{PID: 2105, PPID: 2000, UID: ana, Start: 89005, NoStat: true, Argv: mySrv, Cwd: other},
		{PID: 2106, PPID: 2000, UID: ana, Start: 95000, Argv: mySrv, Cwd: project}, // a duplicate
		{PID: 2107, PPID: 2000, UID: ana, Start: 95001, Argv: []string{"bash", "-c", "rg 'ünï code' | head"}, Cwd: project, Comm: "my srv (x) ü"},
		// Orphans of an OpenCode that died: adopted by init and by systemd --user.
		{PID: 3000, PPID: 1, UID: ana, Start: 50000, Argv: mySrv, Cwd: project},
		{PID: 3001, PPID: 900, UID: ana, Start: 50001, Argv: ghArgv, Cwd: other},
		{PID: 3004, PPID: 1, UID: ana, Start: 50004, State: "Z", Comm: "node"},
		// Not orphans: another user's, one ana runs by hand.
		{PID: 3002, PPID: 1, UID: 1001, Start: 50002, Argv: mySrv, Cwd: "/home/bo/my projéct"},
		{PID: 3003, PPID: 1000, UID: ana, Start: 50003, Argv: mySrv, Cwd: project},
		// Another OpenCode (serve), not watched, and its child.
		{PID: 4000, PPID: 1000, UID: ana, Start: 60000, Argv: []string{"opencode", "serve"}, Cwd: "/home/ana"},
		{PID: 4001, PPID: 4000, UID: ana, Start: 60001, Argv: mySrv, Cwd: project},
	}
	// 2104 exited between OpenCode's children list and its own read.
	return procs, map[int][]int{2000: {2104}}
}

// writeSynthetic writes the synthetic machine under root.
func writeSynthetic(t testing.TB, root string) {
	procs, vanished := syntheticProcs()
	writeTree(t, root, procs, vanished)
}

// testdata/synthetic is what writeSynthetic writes (go test -run
// TestSyntheticFixture -update rewrites it).
func TestSyntheticFixture(t *testing.T) {
	want := filepath.Join("testdata", "synthetic")
	if *update {
		must(t, os.RemoveAll(want))
		writeSynthetic(t, want)
	}
	got := t.TempDir()
	writeSynthetic(t, got)
	if d := diffTrees(t, got, want); d != "" {
		t.Fatalf("testdata/synthetic is stale (%s): go test -run TestSyntheticFixture -update", d)
	}
}

// diffTrees names the first difference between two trees.
func diffTrees(t *testing.T, a, b string) string {
	seen := map[string]bool{}
	var diff string
	walk := func(root, other string, both bool) {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || diff != "" {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if both && seen[rel] {
				return nil
			}
			seen[rel] = true
			q := filepath.Join(other, rel)
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				l1, _ := os.Readlink(p)
				l2, err := os.Readlink(q)
				if err != nil || l1 != l2 {
					diff = rel + " link"
				}
			case d.IsDir():
				if fi, err := os.Stat(q); err != nil || !fi.IsDir() {
					diff = rel + " dir"
				}
			default:
				b1, _ := os.ReadFile(p)
				b2, err := os.ReadFile(q)
				if err != nil || !bytes.Equal(b1, b2) {
					diff = rel
				}
			}
			return nil
		})
	}
	walk(a, b, false)
	walk(b, a, true)
	return diff
}
