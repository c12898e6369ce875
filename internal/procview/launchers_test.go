package procview

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
)

// The forms each launcher's process takes, as the matcher finds them:
// serving() in the place each form runs.
func TestMatcherLauncherForms(t *testing.T) {
	const dir = "/p"
	cases := []struct {
		command []string
		forms   []Process // Argv and Cwd
	}{
		{[]string{"npx", "-y", "pkg", "a b"}, []Process{
			{Argv: []string{"npx", "-y", "pkg", "a b"}, Cwd: dir},
			{Argv: []string{"/usr/bin/env", "node", "/usr/bin/npx", "-y", "pkg", "a b"}, Cwd: dir},
			{Argv: []string{"node", "/usr/bin/npx", "-y", "pkg", "a b"}, Cwd: dir},
			{Argv: []string{"npm exec pkg a b"}, Cwd: dir},
		}},
		{[]string{"npm", "x", "--yes", "--", "pkg@1.2", "--port=1"}, []Process{
			{Argv: []string{"node", "/usr/bin/npm", "x", "--yes", "--", "pkg@1.2", "--port=1"}, Cwd: dir},
			{Argv: []string{"npm x pkg@1.2 --port=1"}, Cwd: dir},
		}},
		{[]string{"uvx", "mcp-server-fetch", "--x"}, []Process{
			{Argv: []string{"/home/u/.local/bin/uv", "tool", "uvx", "mcp-server-fetch", "--x"}, Cwd: dir},
		}},
		{[]string{"uv", "--directory", "w", "run", "srv.py"}, []Process{
			{Argv: []string{"uv", "--directory", "w", "run", "srv.py"}, Cwd: dir},
			{Argv: []string{"uv", "--directory", "w", "run", "srv.py"}, Cwd: dir + "/w"},
		}},
		{[]string{"pipx", "run", "--spec", "pkg", "app==1.0", "a"}, []Process{
			{Argv: []string{"/usr/bin/python3", "/usr/bin/pipx", "run", "--spec", "pkg", "app==1.0", "a"}, Cwd: dir},
			{Argv: []string{"/v/bin/python", "/v/bin/app", "a"}, Cwd: dir},
		}},
		{[]string{"env", "-i", "-u", "X", "A=1", "npx", "-y", "pkg"}, []Process{
			{Argv: []string{"node", "/usr/bin/npx", "-y", "pkg"}, Cwd: dir},
			{Argv: []string{"npm exec pkg"}, Cwd: dir},
		}},
		{[]string{"env", "-C", "/srv", "-S", "node srv.js\t-v"}, []Process{
			{Argv: []string{"node", "srv.js", "-v"}, Cwd: "/srv"},
		}},
		{[]string{"bash", "-lc", "cd sub && exec env FOO=1 node srv.js"}, []Process{
			{Argv: []string{"bash", "-lc", "cd sub && exec env FOO=1 node srv.js"}, Cwd: dir + "/sub"},
			{Argv: []string{"env", "FOO=1", "node", "srv.js"}, Cwd: dir + "/sub"},
			{Argv: []string{"node", "srv.js"}, Cwd: dir + "/sub"},
		}},
		{[]string{"sh", "-c", "exec npx -y pkg"}, []Process{
			{Argv: []string{"npm exec pkg"}, Cwd: dir},
		}},
		{[]string{"python3", "-m", "pipx", "run", "app"}, []Process{
			{Argv: []string{"/v/bin/python", "/v/bin/app"}, Cwd: dir},
		}},
	}
	for _, c := range cases {
		m := newMatcher([]LocalServer{{Directory: dir, Name: "s", Command: c.command}})
		for _, p := range c.forms {
			if ks := m.serving(p); len(ks) != 1 {
				t.Errorf("%q: %q in %s serves %v", c.command, p.Argv, p.Cwd, ks)
			}
			if ks := m.runs(p); len(ks) != 1 {
				t.Errorf("%q: %q runs %v", c.command, p.Argv, ks)
			}
		}
	}
	// What a launcher cannot be known to run is no form: a script that
	// is not one literal command, an expansion, a cd to a variable, a
	// quoted word.
	for _, c := range []struct {
		command []string
		p       Process
	}{
		{[]string{"sh", "-c", "node x; sleep 600"}, Process{Argv: []string{"sleep", "600"}, Cwd: dir}},
		{[]string{"sh", "-c", "node $SRV"}, Process{Argv: []string{"node", "$SRV"}, Cwd: dir}},
		{[]string{"sh", "-c", "cd $D && node x"}, Process{Argv: []string{"node", "x"}, Cwd: dir}},
		{[]string{"sh", "-c", "node x | tee log"}, Process{Argv: []string{"node", "x"}, Cwd: dir}},
		{[]string{"sh", "-c", "node 'a b.js'"}, Process{Argv: []string{"node", "a b.js"}, Cwd: dir}},
		{[]string{"sh", "-c", "FOO=1 node x"}, Process{Argv: []string{"node", "x"}, Cwd: dir}},
		{[]string{"sh", "-c", "export A=1; node x"}, Process{Argv: []string{"node", "x"}, Cwd: dir}},
		{[]string{"env", "-S", "node 'a b.js'"}, Process{Argv: []string{"node", "a b.js"}, Cwd: dir}},
		{[]string{"npx", "-y", "pkg"}, Process{Argv: []string{"npm"}, Cwd: dir}},
		{[]string{"npx", "-y", "pkg"}, Process{Argv: []string{"npm exec other"}, Cwd: dir}},
		{[]string{"docker", "run", "-i", "img"}, Process{Argv: []string{"img"}, Cwd: dir}},
	} {
		m := newMatcher([]LocalServer{{Directory: dir, Name: "s", Command: c.command}})
		if ks := m.serving(c.p); ks != nil {
			t.Errorf("%q: %q serves %v, want nothing", c.command, c.p.Argv, ks)
		}
	}
}

// A process running a configured command as it is serves that server,
// before another server whose launcher may exec into the same command.
func TestMatcherPrefersTheCommandAsConfigured(t *testing.T) {
	m := newMatcher([]LocalServer{
		{Directory: "/p", Name: "wrapped", Command: []string{"env", "A=1", "node", "srv.js"}},
		{Directory: "/p", Name: "direct", Command: []string{"node", "srv.js"}},
		{Directory: "/p", Name: "also wrapped", Command: []string{"sh", "-c", "node srv.js"}},
	})
	if ks := m.serving(Process{Argv: []string{"node", "srv.js"}, Cwd: "/p"}); !slices.Equal(ks, []Key{{"/p", "direct"}}) {
		t.Errorf("node srv.js serves %v, want direct", ks)
	}
	m = newMatcher([]LocalServer{
		{Directory: "/p", Name: "wrapped", Command: []string{"env", "A=1", "node", "srv.js"}},
		{Directory: "/p", Name: "also wrapped", Command: []string{"sh", "-c", "node srv.js"}},
	})
	if ks := m.serving(Process{Argv: []string{"node", "srv.js"}, Cwd: "/p"}); len(ks) != 2 {
		t.Errorf("node srv.js serves %v, want both launchers (alike: no process tells them apart)", ks)
	}
}

func TestLauncherOf(t *testing.T) {
	for _, c := range []struct {
		command   []string
		name      string
		exits     bool
		container bool
	}{
		{[]string{"/usr/local/bin/mcp-server", "--stdio"}, "", true, false},
		{[]string{"python3", "-m", "mcp_server_git"}, "", true, false},
		{[]string{"npx", "-y", "pkg"}, "npx", true, false},
		{[]string{"npm", "exec", "--", "pkg"}, "npm exec", true, false},
		{[]string{"npm", "start"}, "npm start", false, false},
		{[]string{"uvx", "mcp-server-fetch"}, "uvx", true, false},
		{[]string{"uv", "tool", "run", "x"}, "uv tool run", true, false},
		{[]string{"uv", "--directory", "/w", "run", "srv.py"}, "uv run", true, false},
		{[]string{"pipx", "run", "x"}, "pipx run", true, false},
		{[]string{"bun", "x", "pkg"}, "bun x", true, false},
		{[]string{"pnpm", "--dir", "/w", "dlx", "pkg"}, "pnpm dlx", true, false},
		{[]string{"pnpm", "exec", "pkg"}, "", true, false},
		{[]string{"yarn", "--cwd", "/w", "dlx", "pkg"}, "yarn dlx", true, false},
		{[]string{"uv", "--python=3.12", "tool", "uvx", "x"}, "uvx", true, false},
		{[]string{"nerdctl", "-n", "k8s.io", "run", "-i", "img"}, "nerdctl run", true, true},
		{[]string{"sh", "-c", "exec npx -y pkg"}, "sh -c → npx", true, false},
		{[]string{"bash", "-c", "cd x && node srv.js"}, "bash -c", true, false},
		{[]string{"bash", "-c", "cd x; export A=1; node srv.js"}, "bash -c", false, false},
		{[]string{"sh", "-c", "node 'my srv.js'"}, "sh -c", false, false},
		{[]string{"sh", "-c", "node x; sleep 600"}, "sh -c", false, false},
		{[]string{"sh", "-c", "while true; do node x; done"}, "sh -c", false, false},
		{[]string{"bash", "run.sh"}, "bash script", false, false},
		{[]string{"env", "A=1", "docker", "run", "-i", "img"}, "env → docker run", true, true},
		{[]string{"docker", "--context", "x", "container", "run", "-i", "img"}, "docker run", true, true},
		{[]string{"podman", "exec", "-i", "c", "srv"}, "podman exec", true, true},
	} {
		if l := LauncherOf(c.command); l.Name != c.name || l.ExitsWithServer != c.exits || l.InContainer != c.container {
			t.Errorf("LauncherOf(%q) = %+v, want %q exits %v container %v", c.command, l, c.name, c.exits, c.container)
		}
	}
}

// A script is read only in its literal form, `[cd DIR &&] [exec] CMD
// ARGS`; any other is left to the shell, never guessed.
func TestLiteralScript(t *testing.T) {
	for _, c := range []struct {
		script string
		next   []string
		dir    string
	}{
		{"node srv.js", []string{"node", "srv.js"}, ""},
		{"  exec\tnode srv.js --port=1 a,b  ", []string{"node", "srv.js", "--port=1", "a,b"}, ""},
		{"cd /srv/sub && exec node srv.js", []string{"node", "srv.js"}, "/srv/sub"},
		{"cd sub&&node ../srv.js", []string{"node", "../srv.js"}, "sub"},
		{"cd - && node srv.js", nil, ""},
		{"cd && node srv.js", nil, ""},
		{"cd a && cd b && node srv.js", nil, ""},
		{"pushd a && node srv.js", nil, ""},
		{"cd ~/x && node srv.js", nil, ""},
		{`node "my srv.js"`, nil, ""},
		{`node my\ srv.js`, nil, ""},
		{"node $HOME/srv.js", nil, ""},
		{"node srv.js >/tmp/log 2>&1", nil, ""},
		{"FOO=1 node srv.js", nil, ""},
		{"exec -a srv node srv.js", nil, ""},
		{"exec", nil, ""},
		{"node srv.js # start", nil, ""},
		{"node srv.js\n", nil, ""},
		{"node srv.js; sleep 600", nil, ""},
		{"node srv.js &", nil, ""},
		{"(node srv.js)", nil, ""},
		{"node *.js", nil, ""},
		{"", nil, ""},
	} {
		next, dir, ok := literalScript(c.script)
		if !slices.Equal(next, c.next) || dir != c.dir || ok != (c.next != nil) {
			t.Errorf("literalScript(%q) = %q %q %v, want %q %q", c.script, next, dir, ok, c.next, c.dir)
		}
	}
}

// npm's title is among the titles computed from the configured command
// (at most four), with what npm masks in it masked
// (TestNpmTitleIsWhatNpmSets checks these against the real npm).
func TestNpmTitle(t *testing.T) {
	for _, c := range []struct {
		command []string
		title   string
	}{
		{[]string{"npx", "-y", "./pkg", "arg1", "--flag", "x"}, "npm exec ./pkg arg1 --flag x"},
		{[]string{"npx", "--yes", "./pkg", "sp ace", "z"}, "npm exec ./pkg sp ace z"},
		{[]string{"npx", "-p", "./pkg", "fake-mcp", "a"}, "npm exec fake-mcp a"},
		{[]string{"npx", "--package", "./pkg", "--", "fake-mcp", "-a"}, "npm exec fake-mcp -a"},
		{[]string{"npm", "exec", "--package=./pkg", "--", "fake-mcp", "q"}, "npm exec fake-mcp q"},
		{[]string{"npm", "exec", "./pkg", "--flag", "x"}, "npm exec ./pkg x"},
		{[]string{"npm", "x", "./pkg"}, "npm x ./pkg"},
		{[]string{"npm", "--prefix", "/w", "exec", "--", "./pkg", "-v"}, "npm exec ./pkg -v"},
		{[]string{"npx", "--registry", "http://127.0.0.1:9/", "-y", "./pkg", "g"}, "npm exec ./pkg g"},
		{[]string{"npx", "-p", "./pkg", "-p", "./dep", "fake-mcp", "a", "b", "c"}, "npm exec fake-mcp a b c"},
		{[]string{"npx", "-y", "@modelcontextprotocol/server-everything", "stdio"}, "npm exec @modelcontextprotocol/server-everything stdio"},
		{[]string{"npx", "-y", "pkg", "--url", "https://u:pw@example.com/x?k=123e4567-e89b-12d3-a456-426614174000"}, "npm exec pkg --url https://u:***@example.com/x?k=***"},
		{[]string{"npx", "-y", "pkg", "--token=npm_abcdefghijklmnopqrstuvwxyz0123456789AB"}, "npm exec pkg --token=npm_***"},
	} {
		l, ok := parseLaunch(c.command)
		if !ok || !slices.Contains(l.titles, c.title) || len(l.titles) > 4 {
			t.Errorf("%q: titles %q, want %q among at most four", c.command, l.titles, c.title)
		}
	}
}

// ServerProcess skips what is not the server: an installer in another
// directory, a launcher that will exec, a zombie.
func TestServerProcessSkipsInstallers(t *testing.T) {
	boot := time.Unix(bootTime, 0)
	proc := func(pid, ppid int, cwd string, argv ...string) Process {
		return Process{PID: pid, PPID: ppid, UID: ana, Birth: uint64(pid), Start: boot, Comm: filepath.Base(argv[0]), Argv: argv, Cwd: cwd}
	}
	tab := newMemTable(
		proc(100, 1, "/p", "opencode"),
		// npm installing: a lifecycle script runs in the package's directory.
		proc(101, 100, "/p", "npm exec pkg"),
		proc(102, 101, "/c/_npx/1/node_modules/dep", "sh", "-c", "node install.js"),
		// bunx installing: its helper runs in bun's cache.
		proc(103, 100, "/p", "bunx", "pkg"),
		proc(104, 103, "/c/.bunx-0/pkg", "/b/bunx.exe", "add", "pkg", "--no-summary", "--force"),
		// pipx installing: its pip is never the server, pipx execs it.
		proc(105, 100, "/p", "/usr/bin/python3", "/usr/bin/pipx", "run", "app"),
		proc(106, 105, "/p", "/v/bin/python", "-m", "pip", "install", "app"),
		// a shell whose first child exited (a zombie) and second runs.
		proc(107, 100, "/p", "sh", "-c", "node a.js | tee log"),
		proc(108, 107, "/p", "node", "a.js"),
		proc(109, 107, "/p", "tee", "log"),
		// npm installed: its bin, two levels below.
		proc(110, 100, "/p", "npm exec pkg2"),
		proc(111, 110, "/c/_npx/2/node_modules/dep", "sh", "-c", "node install.js"),
		proc(112, 110, "/p", "sh", "-c", "'pkg2'"),
		proc(113, 112, "/p", "node", "/c/_npx/2/node_modules/.bin/pkg2"),
		// a shell whose only child is being exec'd (no argv yet).
		proc(114, 100, "/p", "sh", "-c", "node b.js"),
		proc(115, 114, "/p", "sh"),
	)
	tab.update(115, func(p *Process) { p.Argv = nil })
	tab.update(108, func(p *Process) { p.Zombie = true })
	for _, c := range []struct {
		launcher, server int
		err              error
	}{
		{101, 0, ErrNoServer}, {103, 0, ErrNoServer}, {105, 0, ErrNoServer}, {107, 109, nil}, {110, 113, nil}, {113, 113, nil}, {114, 0, ErrNoServer},
	} {
		p, err := tab.Read(c.launcher)
		must(t, err)
		srv, _, err := ServerProcess(tab, p)
		if !errors.Is(err, c.err) || c.err == nil && srv.PID != c.server {
			t.Errorf("ServerProcess(%d %q) = %d %v, want %d %v", c.launcher, p.Argv, srv.PID, err, c.server, c.err)
		}
	}
	gone := Process{PID: 110, Birth: 1}
	if _, _, err := ServerProcess(tab, gone); !errors.Is(err, ErrGone) {
		t.Errorf("ServerProcess of a reused pid: %v, want ErrGone", err)
	}
}

// A child read while it exec'd (an empty cmdline) is read again on the
// next scan, and at most maxRereads times.
func TestViewRereadsAChildBeingExecd(t *testing.T) {
	tab, oc := simpleTable()
	tab.update(101, func(p *Process) { p.Argv = nil })
	v := newView(t, tab, oc, simpleServers())
	if _, ok := scan(t, v).Child(Key{"/p", "a"}); ok {
		t.Fatal("a child with no argv serves a")
	}
	tab.update(101, func(p *Process) { p.Argv = []string{"srv", "a"} })
	if _, ok := scan(t, v).Child(Key{"/p", "a"}); !ok {
		t.Fatal("the child, read again, does not serve a")
	}
	tab.update(102, func(p *Process) { p.Argv = nil })
	tab.put(Process{PID: 103, PPID: oc, UID: ana, Birth: 10300, Comm: "srv", Cwd: "/p"})
	scan(t, v)
	reads := tab.reads
	for range maxRereads + 2 {
		scan(t, v)
	}
	// One stat of OpenCode per scan, and maxRereads reads of the child.
	if n := tab.reads - reads; n != maxRereads+2+maxRereads {
		t.Errorf("%d reads in %d scans of a child that never settles, want %d", n, maxRereads+2, maxRereads+2+maxRereads)
	}
}

// Any argv, configured or read from /proc: recognising its launcher,
// deriving its forms and naming it never panics, and a script's words
// are only ever literal: words of the script as it is written.
func FuzzLaunch(f *testing.F) {
	for _, argv := range [][]string{
		{"npx", "-y", "--", "pkg", "a b"},
		{"npm", "--prefix", "-", "exec", "-c"},
		{"env", "-S", "-C /x node 'a", "b"},
		{"env", "-u"},
		{"sh", "-lc", "cd \"$X\" && exec env A=1 uvx y 2>&1 ; # x"},
		{"bash", "-o"},
		{"uv", "--directory"},
		{"pipx", "run", "--spec"},
		{"python3", "-m"},
		{"docker", "container"},
		{"npm exec x -- y"},
	} {
		f.Add(strings.Join(argv, "\x00"))
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv := strings.Split(s, "\x00")
		_ = appendForms(nil, argv, "/p", 0)
		_ = LauncherOf(argv)
		if l, ok := parseLaunch(argv); ok && l.name == "" {
			t.Fatalf("%q: a launcher without a name", argv)
		}
		script := argv[len(argv)-1]
		next, dir, ok := literalScript(script)
		if ok != (len(next) > 0) {
			t.Fatalf("%q: ok %v with words %q", script, ok, next)
		}
		for _, w := range append(next, dir) {
			if strings.ContainsAny(w, shellSpecial+" \t") || !strings.Contains(script, w) {
				t.Fatalf("%q: %q is not a literal word of the script", script, w)
			}
		}
	})
}

// A process title is shown as printable text, and a header's value in it
// never survives, however the words fall.
func FuzzDisplayTitle(f *testing.F) {
	f.Add("pkg --header", "Authorization: Bearer abcdefgh")
	f.Add("pkg  -H", "k\x1b[2J")
	f.Add("'x' \t", "\u00a0y")
	f.Fuzz(func(t *testing.T, a, value string) {
		title := "npm exec " + a + " " + value
		out := Display([]string{title})
		for _, r := range out {
			if unicode.IsControl(r) || (!unicode.IsGraphic(r) && r != ' ') {
				t.Fatalf("Display(%q) = %q holds %U", title, out, r)
			}
		}
		fields := strings.Fields(a)
		if len(fields) > 0 && headerFlag[fields[len(fields)-1]] && strings.HasSuffix(a, fields[len(fields)-1]) &&
			len(value) > 3 && !strings.ContainsAny(value, ": \t\n\r\v\f") && strings.Contains(out, value) && !strings.Contains(a, value) {
			t.Fatalf("the value of %s survived: %q", fields[len(fields)-1], out)
		}
	})
}

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
