package procview

import (
	"errors"
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
