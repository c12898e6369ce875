package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// A recorded-style /proc tree, as procview's tests write them (stat,
// status, cmdline, the cwd link and each thread's children list; never
// environ), of a machine where user ana (uid 1000) runs:
//
//   - an OpenCode serve (2000) in her project, with two children of one
//     server (a duplicate), another server, and two identical tool
//     commands (no server's: no duplicate);
//   - the npm package's node wrapper (4000) around the native binary
//     (4001), whose server in "/home/ana/third dir" runs twice;
//   - orphans of two OpenCode processes that were SIGKILLed: her
//     project's server adopted by init (3000), left by 1400 and proven
//     by its OPENCODE_PID and its process group, and another directory's
//     adopted by systemd --user (3001), a directory no flag and no daemon
//     names (its cwd does), left by 1500 and proven by the record a
//     daemon kept (anaRecord);
//   - a child of bo's OpenCode (5001) running her server: listed, never
//     reaped;
//   - not orphans: bo's copy of the server (3002), one she runs from her
//     shell (3003), an adopted sleep that is no server (3004), a zombie
//     (3005).
const (
	ana      = 1000
	bo       = 1001
	proj     = "/home/ana/my projéct"
	otherDir = "/home/ana/other dir"
	thirdDir = "/home/ana/third dir"
)

var (
	srvA = []string{"node", "srv.js", "--api-key", "sk-live-abcdefghijklmnop"}
	srvB = []string{"/usr/local/bin/srvb", "--name", "café"}
	srvC = []string{"python3", "-m", "srvc", "--header", "Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123"}
	tool = []string{"bash", "-c", "rg 'x y' | head"}
)

type fakeProc struct {
	PID, PPID, UID int
	PGID           int // PPID unless set
	State          string
	Start          uint64
	Comm           string
	Argv           []string
	Cwd            string
	// Env, when set, is written as the environ file (only what a test
	// needs: OPENCODE_PID).
	Env []string
}

func anaProcs() []fakeProc {
	return []fakeProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Comm: "systemd", Cwd: "/"},
		{PID: 900, PPID: 1, UID: ana, Start: 900, Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Comm: "systemd", Cwd: "/"},
		{PID: 1000, PPID: 900, UID: ana, Start: 1000, Argv: []string{"-bash"}, Comm: "bash", Cwd: "/home/ana"},
		{PID: 2000, PPID: 1000, UID: ana, Start: 80000, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: proj},
		{PID: 2100, PPID: 2000, UID: ana, Start: 81000, Argv: srvA, Cwd: proj},
		{PID: 2101, PPID: 2000, UID: ana, Start: 95000, Argv: srvA, Cwd: proj},
		{PID: 2102, PPID: 2000, UID: ana, Start: 81001, Argv: srvB, Cwd: proj, Comm: "srvb"},
		{PID: 2103, PPID: 2000, UID: ana, Start: 96000, Argv: tool, Cwd: proj},
		{PID: 2104, PPID: 2000, UID: ana, Start: 96001, Argv: tool, Cwd: proj},
		{PID: 3000, PPID: 1, PGID: 1400, UID: ana, Start: 50000, Argv: srvA, Cwd: proj, Env: []string{"OPENCODE_PID=1400"}},
		{PID: 3001, PPID: 900, PGID: 1500, UID: ana, Start: 50001, Argv: srvC, Cwd: otherDir},
		{PID: 3002, PPID: 1, UID: bo, Start: 50002, Argv: srvA, Cwd: proj},
		{PID: 3003, PPID: 1000, UID: ana, Start: 50003, Argv: srvA, Cwd: proj},
		{PID: 3004, PPID: 1, UID: ana, Start: 50004, Argv: []string{"sleep", "600"}, Cwd: proj},
		{PID: 3005, PPID: 1, UID: ana, Start: 50005, State: "Z", Comm: "node"},
		{PID: 4000, PPID: 1000, UID: ana, Start: 60000, Argv: []string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, Cwd: "/home/ana"},
		{PID: 4001, PPID: 4000, UID: ana, Start: 60001, Argv: []string{"/usr/lib/node_modules/opencode-ai/node_modules/opencode-linux-x64/bin/opencode"}, Cwd: "/home/ana"},
		{PID: 4002, PPID: 4001, UID: ana, Start: 61000, Argv: srvA, Cwd: thirdDir},
		{PID: 4003, PPID: 4001, UID: ana, Start: 62000, Argv: srvA, Cwd: thirdDir},
		{PID: 5000, PPID: 1, UID: bo, Start: 70000, Argv: []string{"opencode"}, Cwd: "/home/bo"},
		{PID: 5001, PPID: 5000, UID: ana, Start: 70001, Argv: srvA, Cwd: proj},
	}
}

// anaConfig is what the config files of each directory hold.
func anaConfig(dir string) map[string]opencode.MCPEntry {
	local := func(cmd []string) opencode.MCPEntry { return opencode.MCPEntry{Type: "local", Command: cmd} }
	switch dir {
	case proj:
		return map[string]opencode.MCPEntry{"a": local(srvA), "b": local(srvB), "r": {Type: "remote", URL: "https://mcp.example.com"}}
	case otherDir:
		return map[string]opencode.MCPEntry{"c": local(srvC)}
	case thirdDir:
		return map[string]opencode.MCPEntry{"a": local(srvA)}
	}
	return nil
}

// writeTree writes procs as a /proc tree under root.
func writeTree(t testing.TB, root string, procs []fakeProc) {
	t.Helper()
	// /proc/stat: procfs reads the boot time from it.
	must(t, os.MkdirAll(root, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "stat"), []byte("cpu  1 0 1 1 0 0 0 0 0 0\nbtime 1796110733\nprocesses 1\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "sys", "kernel", "random"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "sys", "kernel", "random", "boot_id"), []byte(treeBoot+"\n"), 0o644))
	kids := map[int][]int{}
	for _, p := range procs {
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.PID))
		must(t, os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(p.PID)), 0o755))
		state := p.State
		if state == "" {
			state = "S"
		}
		comm := p.Comm
		if comm == "" {
			comm = filepath.Base(p.Argv[0])
		}
		pgid := p.PGID
		if pgid == 0 {
			pgid = p.PPID
		}
		stat := fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 4194304 639 0 0 0 0 0 0 0 20 0 1 0 %d 1828069376 2486\n", p.PID, comm, state, p.PPID, pgid, pgid, p.Start)
		must(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
		status := fmt.Sprintf("Name:\t%s\nState:\t%s\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", comm, state, p.PID, p.PID, p.PPID, p.UID, p.UID, p.UID, p.UID)
		must(t, os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
		var cmdline string
		if state != "Z" {
			cmdline = strings.Join(p.Argv, "\x00") + "\x00"
			must(t, os.Symlink(p.Cwd, filepath.Join(dir, "cwd")))
		}
		must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644))
		if p.Env != nil {
			must(t, os.WriteFile(filepath.Join(dir, "environ"), []byte(strings.Join(p.Env, "\x00")+"\x00"), 0o600))
		}
		var list []byte
		for _, c := range kids[p.PID] {
			list = append(strconv.AppendInt(list, int64(c), 10), ' ')
		}
		must(t, os.WriteFile(filepath.Join(dir, "task", strconv.Itoa(p.PID), "children"), list, 0o644))
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// anaOptions are doctor's options on ana's machine: her project named
// with --directory, no daemon, and the record a daemon kept while
// OpenCode 1500 lived.
func anaOptions(t testing.TB) Options {
	root := t.TempDir()
	writeTree(t, root, anaProcs())
	return Options{
		Directories:  []string{proj},
		ProcessTable: func() (procview.Table, error) { return procview.ProcFS(root) },
		UID:          ana,
		Record:       anaRecord(t),
		localConfig:  anaConfig,
	}
}

// treeBoot is the boot of the trees writeTree writes, and of anaRecord.
const treeBoot = "0b7e5d2f-3c1a-4e8b-9f6d-0a1b2c3d4e5f"

// anaRecord is what a daemon saw under OpenCode 1500 before it was
// SIGKILLed: 3001 serving otherDir's c (a v2-line OpenCode leaves nothing
// in its children's environment: the record is the evidence there).
func anaRecord(t testing.TB) *procview.Record {
	r := &procview.Record{Dir: filepath.Join(t.TempDir(), "processes")}
	boot := time.Unix(1796110733, 0)
	oc := procview.Ident{PID: 1500, Birth: 40000, Start: boot.Add(400 * time.Second), PGID: 1500}
	must(t, r.Save(procview.Sightings{OpenCode: oc, Boot: treeBoot, Seen: []procview.Sighting{
		{Ident: procview.Ident{PID: 3001, Birth: 50001, Start: boot.Add(50001 * 10 * time.Millisecond), PGID: 1500}, Parent: oc, Directory: otherDir, Server: "c"},
	}}))
	return r
}
