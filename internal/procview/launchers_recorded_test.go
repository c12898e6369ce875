package procview

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The project of testdata/launchers/running: a stand-in for OpenCode
// (pid 958) started one local server per launcher there.
const launchDir = "/tmp/launch/my project"

// recordedLaunchers are the servers of testdata/launchers/running as a
// user writes them in opencode.json, with what the recording holds.
var recordedLaunchers = []struct {
	name    string
	command []string
	// child is OpenCode's child, server the process ServerProcess finds
	// (0 for the child itself), container when the server is in one.
	child, server int
	container     bool
	launcher      string
	exits         bool
	// shown are Display of the child and of the server.
	childShown, serverShown string
}{
	{"everything", []string{"npx", "-y", "@modelcontextprotocol/server-everything", "stdio"}, 969, 1653, false, "npx", true,
		"npm exec @modelcontextprotocol/server-everything stdio",
		"node /tmp/launch/npm-cache/_npx/5b2dd62b9d0bddd4/node_modules/.bin/mcp-server-everything stdio"},
	{"sh", []string{"sh", "-c", "node srv.js --stdio"}, 970, 973, false, "sh -c", true,
		"sh -c 'node srv.js --stdio'", "node srv.js --stdio"},
	{"bash cd", []string{"bash", "-c", "cd sub && node ../srv.js --stdio"}, 972, 0, false, "bash -c", true,
		"node ../srv.js --stdio", "node ../srv.js --stdio"},
	{"compound", []string{"sh", "-c", "node srv.js --compound; sleep 600"}, 975, 983, false, "sh -c", false,
		"sh -c 'node srv.js --compound; sleep 600'", "node srv.js --compound"},
	{"env", []string{"env", "API_KEY=sk-abcdefghijklmnopqrstuvwxyz", "node", "srv.js", "--from-env"}, 977, 0, false, "env", true,
		"node srv.js --from-env", "node srv.js --from-env"},
	{"github", []string{"docker", "run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123", "ghcr.io/github/github-mcp-server"}, 981, 0, true, "docker run", true,
		"docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN=*** ghcr.io/github/github-mcp-server",
		"docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN=*** ghcr.io/github/github-mcp-server"},
	{"podman", []string{"podman", "run", "-i", "--rm", "localhost/fake-mcp:1", "/srv"}, 982, 0, true, "podman run", true,
		"podman run -i --rm localhost/fake-mcp:1 /srv", "podman run -i --rm localhost/fake-mcp:1 /srv"},
	{"pnpm", []string{"pnpm", "dlx", "@modelcontextprotocol/server-everything", "stdio"}, 985, 1626, false, "pnpm dlx", true,
		"node /tmp/launchers/node_modules/.bin/pnpm dlx @modelcontextprotocol/server-everything stdio",
		"node /root/.cache/pnpm/dlx/euu2pqos3wypvog2pt2yxl6jhy/1a2334d9c09-62aa/node_modules/.bin/../@modelcontextprotocol/server-everything/dist/index.js stdio"},
	{"pnpx", []string{"pnpx", "@modelcontextprotocol/server-everything", "stdio"}, 986, 1639, false, "pnpx", true,
		"node /tmp/launchers/node_modules/.bin/pnpx @modelcontextprotocol/server-everything stdio",
		"node /root/.cache/pnpm/dlx/euu2pqos3wypvog2pt2yxl6jhy/1a2334d9c09-62aa/node_modules/.bin/../@modelcontextprotocol/server-everything/dist/index.js stdio"},
	{"bunx", []string{"bunx", "@modelcontextprotocol/server-everything", "stdio"}, 987, 1040, false, "bunx", true,
		"bunx @modelcontextprotocol/server-everything stdio",
		"node /root/.bun/install/cache/.bunx-0/@modelcontextprotocol/server-everything@latest/node_modules/.bin/mcp-server-everything stdio"},
	{"yarn", []string{"yarn", "dlx", "@modelcontextprotocol/server-everything", "stdio"}, 989, 1799, false, "yarn dlx", true,
		"node /tmp/launchers-berry/node_modules/.bin/yarn dlx @modelcontextprotocol/server-everything stdio",
		"/usr/bin/node /tmp/xfs-b290cc3a/dlx-989/.yarn/cache/@modelcontextprotocol-server-everything-npm-2026.8.31-0b33e3b2df-c0ec4e22e5.zip/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio"},
	{"pipx", []string{"pipx", "run", "--pip-args=--no-build-isolation --no-index", "--spec", "/tmp/launch/pypkg", "fake-mcp-py", "--stdio"}, 990, 0, false, "pipx run", true,
		"/tmp/launch/pipx/.cache/2f3a0f08485b747/bin/python /tmp/launch/pipx/.cache/2f3a0f08485b747/bin/fake-mcp-py --stdio",
		"/tmp/launch/pipx/.cache/2f3a0f08485b747/bin/python /tmp/launch/pipx/.cache/2f3a0f08485b747/bin/fake-mcp-py --stdio"},
}

func recordedLauncherServers() []LocalServer {
	var out []LocalServer
	for _, l := range recordedLaunchers {
		out = append(out, LocalServer{Directory: launchDir, Name: l.name, Command: l.command})
	}
	return out
}

// A launcher per server, recorded: the view assigns each of OpenCode's
// children to the server whose configured command started it (retitled,
// exec'd, moved by a cd), ServerProcess finds the process that runs the
// server below it (or says it is in a container), and both are shown
// escaped, secrets masked.
func TestLaunchersRecorded(t *testing.T) {
	pt := openTable(t, filepath.Join("testdata", "launchers", "running"))
	v := newView(t, pt, 958, recordedLauncherServers())
	s := scan(t, v)
	for _, want := range recordedLaunchers {
		c, ok := s.Child(Key{launchDir, want.name})
		if !ok || c.PID != want.child {
			t.Errorf("%s: served by %d (found %v), want %d", want.name, c.PID, ok, want.child)
			continue
		}
		if got := c.Command(); got != want.childShown {
			t.Errorf("%s: child shown as %q, want %q", want.name, got, want.childShown)
		}
		if l := LauncherOf(want.command); l.Name != want.launcher || l.ExitsWithServer != want.exits || l.InContainer != want.container {
			t.Errorf("%s: LauncherOf = %+v, want %q exits %v container %v", want.name, l, want.launcher, want.exits, want.container)
		}
		p, err := pt.Read(c.PID)
		must(t, err)
		srv, inContainer, err := ServerProcess(pt, p)
		wantPID := want.server
		if wantPID == 0 {
			wantPID = want.child
		}
		if err != nil || srv.PID != wantPID || inContainer != want.container {
			t.Errorf("%s: ServerProcess = %d container %v err %v, want %d container %v", want.name, srv.PID, inContainer, err, wantPID, want.container)
			continue
		}
		if got := Display(srv.Argv); got != want.serverShown {
			t.Errorf("%s: server shown as %q, want %q", want.name, got, want.serverShown)
		}
	}
	if len(s.Others) != 0 || len(s.Duplicates()) != 0 {
		t.Errorf("others %v duplicates %v, want none", pids(s.Others), s.Duplicates())
	}
	if c, _ := s.Child(Key{launchDir, "github"}); strings.Contains(c.Command(), "ghp_") {
		t.Errorf("the docker child shows its token: %q", c.Command())
	}
}

// The first moments of an npx, recorded: node running the npx script
// (the first 0.3 s) is matched as configured; npm's first title, "npm"
// (the next 0.15 s), names no server, so the view reads the child again
// on the next scan and finds it then, retitled.
func TestLaunchersNpxStarting(t *testing.T) {
	npx := []LocalServer{{Directory: launchDir, Name: "everything", Command: []string{"npx", "-y", "@modelcontextprotocol/server-everything", "stdio"}}}
	key := Key{launchDir, "everything"}

	pt := openTable(t, filepath.Join("testdata", "launchers", "npx-start"))
	s := scan(t, newView(t, pt, 31428, npx))
	c, ok := s.Child(key)
	if !ok || c.PID != 31436 || c.Command() != "node /usr/bin/npx -y @modelcontextprotocol/server-everything stdio" {
		t.Fatalf("npx before its title: served by %+v (%v) %q", c, ok, c.Command())
	}
	p, err := pt.Read(31436)
	must(t, err)
	if _, _, err := ServerProcess(pt, p); !errors.Is(err, ErrNoServer) {
		t.Errorf("ServerProcess of an npx that runs nothing yet: %v, want ErrNoServer", err)
	}

	root := t.TempDir()
	must(t, os.CopyFS(root, os.DirFS(filepath.Join("testdata", "launchers", "npx-npm-title"))))
	pt = openTable(t, root)
	v := newView(t, pt, 31428, npx)
	first := scan(t, v)
	if _, ok := first.Child(key); ok || !slices.Equal(pids(first.Others), []int{31436}) {
		t.Fatalf("npm titled \"npm\": served %v, others %v", first.Servers, pids(first.Others))
	}
	title := "npm exec @modelcontextprotocol/server-everything stdio" + strings.Repeat("\x00", 13)
	must(t, os.WriteFile(filepath.Join(root, "31436", "cmdline"), []byte(title), 0o644))
	second := scan(t, v)
	if c, ok := second.Child(key); !ok || c.PID != 31436 {
		t.Fatalf("after npm's title: served by %+v (%v), others %v", c, ok, pids(second.Others))
	}
	if ev := describe(first, second); len(ev) != 0 {
		t.Errorf("a child read again is no event: %v", ev)
	}
	if k := v.known[31436]; k.unsettled != 0 {
		t.Errorf("the retitled child is still read again (%d scans left)", k.unsettled)
	}
}

// testdata/launchers/uv-synthetic: uv cannot be installed here (PyPI is
// unreachable), so this tree is written from uv's source instead of
// recorded (testdata/README.md): an OpenCode (5000) of ana's in
// "/home/ana/py proj" whose servers run through uvx (exec'd into `uv
// tool uvx`, the tool its child), uv tool run, uv --directory … run
// (uv chdir'd), and a uvx still installing its tool (uv building a
// source distribution: a python in a build directory).
const uvProject = "/home/ana/py proj"

var uvServers = []LocalServer{
	{Directory: uvProject, Name: "fetch", Command: []string{"uvx", "mcp-server-fetch", "--ignore-robots-txt"}},
	{Directory: uvProject, Name: "time", Command: []string{"uv", "tool", "run", "mcp-server-time", "--local-timezone", "Europe/Paris"}},
	{Directory: uvProject, Name: "weather", Command: []string{"uv", "--directory", "/home/ana/weather", "run", "weather.py"}},
	{Directory: uvProject, Name: "git", Command: []string{"uvx", "mcp-server-git", "--repository", "."}},
}

func uvSyntheticProcs() []fakeProc {
	const env = "/home/ana/.cache/uv/archive-v0/Jx8h3kQ2mZ"
	const env2 = "/home/ana/.cache/uv/archive-v0/Pq4n7vR1sT"
	return []fakeProc{
		{PID: 5000, PPID: 4000, UID: ana, Start: 70000, Argv: []string{"/home/ana/.opencode/bin/opencode", "serve"}, Cwd: uvProject},
		{PID: 5100, PPID: 5000, UID: ana, Start: 70100, Comm: "uv", Argv: []string{"/home/ana/.local/bin/uv", "tool", "uvx", "mcp-server-fetch", "--ignore-robots-txt"}, Cwd: uvProject},
		{PID: 5101, PPID: 5100, UID: ana, Start: 70150, Comm: "mcp-server-fetc", Argv: []string{env + "/bin/python", env + "/bin/mcp-server-fetch", "--ignore-robots-txt"}, Cwd: uvProject},
		{PID: 5110, PPID: 5000, UID: ana, Start: 70110, Argv: []string{"uv", "tool", "run", "mcp-server-time", "--local-timezone", "Europe/Paris"}, Cwd: uvProject},
		{PID: 5111, PPID: 5110, UID: ana, Start: 70160, Comm: "mcp-server-time", Argv: []string{env2 + "/bin/python", env2 + "/bin/mcp-server-time", "--local-timezone", "Europe/Paris"}, Cwd: uvProject},
		{PID: 5120, PPID: 5000, UID: ana, Start: 70120, Argv: []string{"uv", "--directory", "/home/ana/weather", "run", "weather.py"}, Cwd: "/home/ana/weather"},
		{PID: 5121, PPID: 5120, UID: ana, Start: 70170, Comm: "python3", Argv: []string{"/home/ana/weather/.venv/bin/python3", "weather.py"}, Cwd: "/home/ana/weather"},
		{PID: 5130, PPID: 5000, UID: ana, Start: 70130, Comm: "uv", Argv: []string{"/home/ana/.local/bin/uv", "tool", "uvx", "mcp-server-git", "--repository", "."}, Cwd: uvProject},
		{PID: 5131, PPID: 5130, UID: ana, Start: 70180, Comm: "python", Argv: []string{"/home/ana/.cache/uv/builds-v0/.tmpV2x9/bin/python", "-c", "import sys; exec(sys.stdin.read())"},
			Cwd: "/home/ana/.cache/uv/sdists-v9/pypi/mcp-server-git/2025.1.14/src"},
	}
}

// testdata/launchers/uv-synthetic is what uvSyntheticProcs describes (go
// test -run TestUvSyntheticFixture -update rewrites it).
func TestUvSyntheticFixture(t *testing.T) {
	want := filepath.Join("testdata", "launchers", "uv-synthetic")
	if *update {
		must(t, os.RemoveAll(want))
		writeTree(t, want, uvSyntheticProcs(), nil)
	}
	got := t.TempDir()
	writeTree(t, got, uvSyntheticProcs(), nil)
	if d := diffTrees(t, got, want); d != "" {
		t.Fatalf("testdata/launchers/uv-synthetic is stale (%s): go test -run TestUvSyntheticFixture -update", d)
	}
}

// uvx, uv tool run and uv run, as uv's source says they run.
func TestLaunchersUvSynthetic(t *testing.T) {
	pt := openTable(t, filepath.Join("testdata", "launchers", "uv-synthetic"))
	s := scan(t, newView(t, pt, 5000, uvServers))
	for _, c := range []struct {
		name          string
		child, server int
		launcher      string
		serverShown   string
	}{
		{"fetch", 5100, 5101, "uvx", "/home/ana/.cache/uv/archive-v0/Jx8h3kQ2mZ/bin/python /home/ana/.cache/uv/archive-v0/Jx8h3kQ2mZ/bin/mcp-server-fetch --ignore-robots-txt"},
		{"time", 5110, 5111, "uv tool run", "/home/ana/.cache/uv/archive-v0/Pq4n7vR1sT/bin/python /home/ana/.cache/uv/archive-v0/Pq4n7vR1sT/bin/mcp-server-time --local-timezone Europe/Paris"},
		{"weather", 5120, 5121, "uv run", "/home/ana/weather/.venv/bin/python3 weather.py"},
		{"git", 5130, 0, "uvx", ""},
	} {
		ch, ok := s.Child(Key{uvProject, c.name})
		if !ok || ch.PID != c.child {
			t.Errorf("%s: served by %d (%v), want %d", c.name, ch.PID, ok, c.child)
			continue
		}
		var cmd []string
		for _, sv := range uvServers {
			if sv.Name == c.name {
				cmd = sv.Command
			}
		}
		if l := LauncherOf(cmd); l.Name != c.launcher || !l.ExitsWithServer {
			t.Errorf("%s: LauncherOf = %+v, want %q, exits with its server", c.name, l, c.launcher)
		}
		p, err := pt.Read(ch.PID)
		must(t, err)
		srv, _, err := ServerProcess(pt, p)
		if c.server == 0 {
			if !errors.Is(err, ErrNoServer) {
				t.Errorf("%s: installing, ServerProcess = %d %v, want ErrNoServer", c.name, srv.PID, err)
			}
			continue
		}
		if err != nil || srv.PID != c.server || Display(srv.Argv) != c.serverShown {
			t.Errorf("%s: ServerProcess = %d %q %v, want %d %q", c.name, srv.PID, Display(srv.Argv), err, c.server, c.serverShown)
		}
	}
	if len(s.Others) != 0 {
		t.Errorf("others %v", pids(s.Others))
	}
}
