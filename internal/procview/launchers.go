package procview

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Launchers: what a configured command looks like in the process table
// over its life.
//
// OpenCode executes a local server's command as configured, so its child
// is the command's program: the server itself, or a launcher that starts
// the server (npx, uvx, a shell, docker). A launcher may retitle itself,
// exec into another program under the same pid, or spawn the server below
// it. Each row says what OpenCode's child looks like at each moment, where
// the server is, and whether the launcher exits when its server exits.
// "Measured" rows were run here (Linux, 2026-12-01: node 20.20, npm 11.19,
// pnpm 9.15, yarn 1.22 and 4.18, bun 1.4.5, pipx 1.1 on Python 3.11, dash
// 0.5.12, bash 5.2.15, docker CLI 28.2 and podman 4.3 against a socket that
// never answers); testdata/launchers holds such trees (testdata/README.md).
//
//   - A binary: its argv is the command; compared by the program's last
//     path element.
//   - A script (#!): the kernel runs its interpreter with the script's
//     path, so the child is ["node", "/usr/bin/npx", ...] (or, for a
//     moment, ["/usr/bin/env", "node", "/usr/bin/npx", ...]): up to two
//     interpreter words in front. Measured.
//   - npx ARGS, npm exec ARGS, npm x ARGS: node running npm; after about
//     0.3 s npm sets its title to "npm", after about 0.45 s to "npm " plus
//     its positional arguments ("npm exec ./pkg a --flag x"): cmdline is
//     then ONE word padded with NULs (see parseCmdline). npm's own options
//     are dropped (-y, --yes, -p X, --package=X, a "--"), arguments with
//     spaces are joined unquoted, and npm masks URL passwords, npm tokens
//     and UUIDs in it (npmTitles). The server runs two levels below, in
//     npm's working directory: npm → sh -c "'BIN' ARGS" → node
//     …/_npx/HASH/node_modules/.bin/BIN ARGS (lifecycle scripts of an
//     install run elsewhere: in the package's directory). npm exits when
//     the server does. Measured.
//   - pnpm dlx ARGS, pnpx ARGS: node running pnpm, no retitle; the server
//     is its child (pnpm's shell shim, which execs node on the bin), in
//     pnpm's working directory. pnpm exits when the server does. Measured
//     (with a file: package, offline).
//   - yarn dlx ARGS (yarn 2 and later; yarn 1 has no dlx): node running
//     yarn, no retitle; the server is its child (/usr/bin/node on the bin
//     inside yarn's cache), in yarn's working directory. yarn exits when
//     the server does. Measured with yarn 4.18.
//   - bunx ARGS, bun x ARGS: the bun binary, argv as configured; it runs an
//     install helper ("bunx.exe add PKG", in bun's cache directory), then
//     the bin as its child in its own working directory (through
//     /usr/bin/env node for a #!/usr/bin/env node bin). bun exits when the
//     server does. Measured (with a file: package).
//   - uvx ARGS: execs "<uvx's directory>/uv tool uvx ARGS" under the same
//     pid; uv tool run ARGS and uv run ARGS spawn the tool as their child
//     and wait for it (the tool is a console script with a
//     #!<env>/bin/python line, so the child is ["<env>/bin/python",
//     "<env>/bin/TOOL", ARGS...]); uv --directory D chdirs to D first.
//     From uv's source (crates/uv/src/bin/uvx.rs, commands/tool/run.rs,
//     lib.rs): uv cannot be installed here.
//   - pipx run [--spec S] APP ARGS: python running pipx, which installs
//     APP into a cached venv (its children then are python and pip, in
//     its working directory) and execs it: the same pid becomes
//     ["<venv>/bin/python", "<venv>/bin/APP", ARGS...]. Measured.
//   - sh -c SCRIPT (bash, dash, zsh…): a script of the literal form
//     `[cd DIR &&] [exec] CMD ARGS` (plain words, no quote, expansion,
//     glob, operator or redirection) runs CMD ARGS in DIR: bash execs it
//     under the same pid, dash 0.5.12 forks it (and execs on `exec cmd`),
//     and both exit when it does. Any other script is not read: the
//     shell is watched as the server's launcher, whatever it runs below
//     it (status says the launcher may outlive its server), because
//     knowing what a script runs needs a shell. Measured.
//   - env [-i] [-u N] [-C D] [-S S] [NAME=V]… CMD: execs CMD. Measured.
//   - python -m MOD: the interpreter is the server (python keeps its
//     argv); only `python -m pipx` is read as pipx.
//   - docker run -i IMAGE, podman run -i IMAGE (and `exec`): the CLI is
//     the child, argv as configured; the server runs in a container, not
//     in this process table. The CLI exits when the container does (from
//     docker's documentation; here only measured alive against a socket
//     that never answers). A local podman also starts helpers (conmon,
//     netavark) as its children.
//
// Matching (match.go) indexes every form the direct child takes: the
// command as configured, npm's title, and what the launcher execs into,
// chained (`env A=1 npx -y pkg` → `npx -y pkg` → "npm exec pkg").
// ServerProcess walks from the launcher down to the server.

// runMode is how a launcher runs its server.
type runMode int

const (
	// spawns: the server is a descendant and the launcher waits for it.
	spawns runMode = iota + 1
	// execs: the launcher becomes another program under the same pid.
	execs
	// contained: the server runs in a container.
	contained
)

// launch is a launcher recognised in a command line.
type launch struct {
	// name is for display: "npx", "sh -c", "docker run".
	name string
	mode runMode
	// next is the command the launcher execs into (execs), or the one it
	// runs in the foreground last (a shell); nil when unknown.
	next []string
	// dir is where the launcher moves and next runs: relative to the
	// launcher's working directory, "" for the same one.
	dir string
	// titles are the process titles the launcher may give itself.
	titles []string
	// exits: the launcher exits when what it runs exits.
	exits bool
	// sameCwd: the server is a child in the launcher's working directory;
	// children elsewhere are its installers.
	sameCwd bool
}

// launcherRow is one launcher: the programs it is known by and how to read
// its arguments.
type launcherRow struct {
	programs []string
	parse    func(prog string, args []string) (launch, bool)
}

// launcherTable is the launcher knowledge, one row per launcher.
var launcherTable = []launcherRow{
	{[]string{"npx"}, parseNpx},
	{[]string{"npm"}, parseNpm},
	{[]string{"pnpm", "pnpx"}, parsePnpm},
	{[]string{"yarn"}, parseYarn},
	{[]string{"bun", "bunx"}, parseBun},
	{[]string{"uvx"}, parseUvx},
	{[]string{"uv"}, parseUv},
	{[]string{"pipx"}, parsePipx},
	{[]string{"sh", "bash", "dash", "zsh", "ash", "ksh", "mksh", "busybox"}, parseShell},
	{[]string{"env"}, parseEnv},
	{[]string{"docker", "podman", "nerdctl"}, parseContainer},
}

var launcherByProgram = func() map[string]*launcherRow {
	m := map[string]*launcherRow{}
	for i := range launcherTable {
		for _, p := range launcherTable[i].programs {
			m[p] = &launcherTable[i]
		}
	}
	return m
}()

// progName is a program as the table knows it: its last path element
// without .exe, .js, .cjs, .mjs or a -cli suffix (npm-cli.js is npm,
// bunx.exe is bunx), yarnpkg as yarn, nodejs as node.
func progName(path string) string {
	name := filepath.Base(path)
	for _, ext := range []string{".exe", ".js", ".cjs", ".mjs"} {
		name = strings.TrimSuffix(name, ext)
	}
	name = strings.TrimSuffix(name, "-cli")
	switch name {
	case "yarnpkg":
		return "yarn"
	case "nodejs":
		return "node"
	}
	return name
}

// isPython: python, python3, python3.12.
func isPython(name string) bool {
	rest, ok := strings.CutPrefix(name, "python")
	return ok && strings.Trim(rest, "0123456789.") == ""
}

// program is the program argv runs and its arguments, looking through an
// interpreter: ["node", "/usr/bin/npx", "-y", "x"] runs npx with ["-y",
// "x"]; ["python3", "-m", "pipx", "run", "x"] runs pipx.
func program(argv []string) (string, []string) {
	if len(argv) == 0 {
		return "", nil
	}
	name := progName(argv[0])
	if name != "node" && !isPython(name) {
		return name, argv[1:]
	}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if isPython(name) && a == "-m" && i+1 < len(argv) {
			if m := argv[i+1]; m == "pipx" || m == "uv" {
				return m, argv[i+2:]
			}
			return name, argv[1:]
		}
		if isOption(a) {
			continue // an interpreter option (--no-warnings)
		}
		return progName(a), argv[i+1:]
	}
	return name, argv[1:]
}

// maxChain bounds how many launchers are followed into one another.
const maxChain = 6

// parseLaunch recognises the launcher argv runs, as configured or as the
// process runs it now (npm's title included); ok is false for a command
// that is no launcher.
func parseLaunch(argv []string) (launch, bool) {
	if len(argv) == 1 && (argv[0] == "npm" || strings.HasPrefix(argv[0], "npm ")) {
		// npm's title: it runs its command below it.
		name := "npm"
		if sub, _, _ := strings.Cut(strings.TrimPrefix(argv[0], "npm "), " "); argv[0] != "npm" && sub != "" {
			name += " " + sub
		}
		return launch{name: name, mode: spawns, exits: true, sameCwd: true}, true
	}
	prog, args := program(argv)
	row := launcherByProgram[prog]
	if row == nil {
		return launch{}, false
	}
	return row.parse(prog, args)
}

// Launcher says how a configured command runs its server.
type Launcher struct {
	// Name is the launcher for display: "npx", "uvx", "sh -c",
	// "docker run", launchers that exec one another joined by " → "
	// ("env → npx"); "" for a command that is the server itself.
	Name string
	// ExitsWithServer: the launcher (OpenCode's child) exits when the
	// server does, so watching it is watching the server. False for a
	// shell running a script that is not one literal command (`node x;
	// sleep 600`): then a crash of the server below it
	// closes no pipe of OpenCode's until the launcher ends, and status
	// says so.
	ExitsWithServer bool
	// InContainer: the server runs in a container (docker, podman), not
	// in this process table.
	InContainer bool
}

// LauncherOf tells how command (a configured command, as in
// opencode.json) runs its server, following launchers that exec one
// another (`sh -c 'exec npx -y x'` is "sh -c → npx").
func LauncherOf(command []string) Launcher {
	out := Launcher{ExitsWithServer: true}
	var names []string
	cmd := command
	for range maxChain {
		l, ok := parseLaunch(cmd)
		if !ok {
			break
		}
		if len(names) == 0 || names[len(names)-1] != l.name {
			names = append(names, l.name)
		}
		out.ExitsWithServer = out.ExitsWithServer && l.exits
		if l.mode == contained {
			out.InContainer = true
			break
		}
		if l.next == nil {
			break
		}
		cmd = l.next
	}
	out.Name = strings.Join(names, " → ")
	return out
}

// ErrNoServer: a launcher runs no server process now. It is installing
// or starting its server, or about to exec into it, or its server has
// exited and it is exiting too: ask again later.
var ErrNoServer = errors.New("launcher runs no server process now")

// maxDepth bounds how far ServerProcess descends.
const maxDepth = 8

// ServerProcess finds the process that runs the server under launcher
// (OpenCode's child): it reads the launcher again and, while the process
// is a launcher that spawns (npm, pnpm, yarn, bun, uv, a shell), goes
// down to its child: the one in its working directory for npm, pnpm,
// bun and uv (installers run elsewhere), the oldest if several. The
// first process that is no launcher is the server: the launcher itself
// when it has exec'd into it (env, pipx, uvx, bash). A docker or podman
// CLI is returned with inContainer set: the server is in its container.
// ErrNoServer when a launcher has no such child now (see ErrNoServer),
// ErrGone when the launcher exited or its pid is another process.
func ServerProcess(t Table, launcher Process) (server Process, inContainer bool, err error) {
	p, err := t.Read(launcher.PID)
	if err != nil {
		return Process{}, false, err
	}
	if !p.Same(launcher) || p.Zombie {
		return Process{}, false, fmt.Errorf("procview: pid %d: %w", launcher.PID, ErrGone)
	}
	for range maxDepth {
		if !settled(p) {
			// Being exec'd, or npm not yet titled: what it becomes is
			// not known yet.
			return p, false, fmt.Errorf("procview: pid %d is starting: %w", p.PID, ErrNoServer)
		}
		l, ok := parseLaunch(p.Argv)
		switch {
		case !ok:
			return p, false, nil
		case l.mode == contained:
			return p, true, nil
		case l.mode == execs:
			// Its children (pipx's pip) are never the server: it
			// becomes the server itself.
			return p, false, fmt.Errorf("procview: pid %d (%s) has not exec'd its server yet: %w", p.PID, l.name, ErrNoServer)
		}
		c, err := serverChild(t, p, l)
		if err != nil {
			return p, false, err
		}
		p = c
	}
	return p, false, fmt.Errorf("procview: pid %d: launchers nest deeper than %d: %w", launcher.PID, maxDepth, ErrNoServer)
}

// serverChild is the child of launcher p that runs (or leads to) its
// server.
func serverChild(t Table, p Process, l launch) (Process, error) {
	kids, err := t.Children(p.PID)
	if err != nil {
		return Process{}, err
	}
	var best Process
	found := false
	for _, pid := range kids {
		c, err := t.Read(pid)
		if err != nil || c.Zombie || c.PPID != p.PID {
			continue
		}
		if l.sameCwd && c.Cwd != p.Cwd {
			continue
		}
		if !found || c.Birth < best.Birth || c.Birth == best.Birth && c.PID < best.PID {
			best, found = c, true
		}
	}
	if !found {
		return Process{}, fmt.Errorf("procview: pid %d (%s) has no server child now: %w", p.PID, l.name, ErrNoServer)
	}
	return best, nil
}

// settled reports whether p's argv is the one it keeps: false while it
// is being exec'd (an empty cmdline) and during npm's first title,
// "npm", which names no server (about 0.15 s of an npx's life): read
// such a child again later.
func settled(p Process) bool {
	return p.Zombie || len(p.Argv) > 0 && !(len(p.Argv) == 1 && p.Argv[0] == "npm")
}

// isOption: a word starting with "-" (not "-" alone).
func isOption(a string) bool { return len(a) > 1 && a[0] == '-' }

// skipOptions returns the index of the first word of args that is not an
// option, or one of an option's value: an option in values takes the
// next word unless written --opt=value. "--" ends the options.
func skipOptions(args []string, values map[string]bool) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return i + 1
		}
		if !isOption(a) {
			return i
		}
		if name, _, eq := strings.Cut(a, "="); !eq && values[name] {
			i++
		}
	}
	return len(args)
}

// npm: the title.

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// npmWords is what nopt, npm's option parser, leaves of args when every
// option takes no value: the words that are no option, and every word
// after "--".
func npmWords(args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if !isOption(a) {
			out = append(out, a)
		}
	}
	return out
}

// npmTitles are the titles npm may give itself when words (npmWords, its
// command first) are what it runs. npm titles itself "npm" and its
// positional words, but an option that takes a value (`--registry URL`,
// npx's `-p PKG`) hides that value from the title, and which options take
// one is npm's own table. Instead of a copy of it, each title that one or
// two hidden values can leave is kept: the words; the words without the
// first (a value before npm's command: `npm --prefix DIR exec …`); the
// first word and the words from the third or fourth positional word on (a
// value or two after it: `npx -p PKG BIN`). A wrong title can only match
// another npm process.
func npmTitles(words []string) []string {
	if len(words) == 0 {
		return nil
	}
	titles := []string{npmTitle(words)}
	if len(words) > 1 && !isOption(words[1]) {
		titles = append(titles, npmTitle(words[1:]))
	}
	for i, n := 2, 0; i < len(words) && n < 2; i++ {
		if !isOption(words[i]) {
			titles = append(titles, npmTitle(append([]string{words[0]}, words[i:]...)))
			n++
		}
	}
	return titles
}

// npmTitle is the title npm sets for its positional words: "npm" and the
// words, masked as @npmcli/redact 4 masks them, joined by spaces
// (lib/npm.js).
func npmTitle(words []string) string {
	out := make([]string, 0, len(words)+1)
	out = append(out, "npm")
	for _, w := range words {
		out = append(out, npmRedact(w))
	}
	return strings.TrimSpace(strings.Join(out, " "))
}

var (
	npmURLPassword = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:)[^/?#@]+@`)
	npmSecret      = regexp.MustCompile(`(?i)\b(npms?_)[a-zA-Z0-9]{36,48}\b`)
	npmUUID        = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
)

// npmRedact masks one word as npm's title does: each piece between
// whitespace or "=" loses a URL's password, npm tokens and UUIDs.
func npmRedact(w string) string {
	if !strings.ContainsAny(w, "-_:") {
		return w // nothing to mask: the common case, kept cheap
	}
	var b strings.Builder
	start := 0
	for i := 0; i <= len(w); i++ {
		if i < len(w) && !strings.ContainsRune("= \t\n\r\f\v", rune(w[i])) {
			continue
		}
		piece := npmURLPassword.ReplaceAllString(w[start:i], "${1}***@")
		piece = npmSecret.ReplaceAllString(piece, "npm_***")
		b.WriteString(npmUUID.ReplaceAllString(piece, "***"))
		if i < len(w) {
			b.WriteByte(w[i])
		}
		start = i + 1
	}
	return b.String()
}

// parseNpx: npx runs `npm exec`, ending npm's options before the first
// word that is no option: everything from the package on is the
// command's.
func parseNpx(_ string, args []string) (launch, bool) {
	i := 0
	for i < len(args) && isOption(args[i]) && args[i] != "--" {
		i++
	}
	if i < len(args) && args[i] == "--" {
		i++
	}
	return launch{name: "npx", mode: spawns, titles: npmTitles(append([]string{"exec"}, args[i:]...)),
		exits: true, sameCwd: true}, true
}

// parseNpm: every npm command retitles; exec and x run a package's bin
// and exit with it, the others (npm start, npm run) run a script of the
// package that procview cannot read. npm's command is its first
// positional word (npmWords).
func parseNpm(_ string, args []string) (launch, bool) {
	words := npmWords(args)
	if len(words) == 0 {
		return launch{}, false
	}
	sub := words[0]
	return launch{name: "npm " + sub, mode: spawns, titles: npmTitles(words),
		exits: sub == "exec" || sub == "x", sameCwd: true}, true
}

// subcommand is the index of the first of words in args, -1 for none: a
// launcher's subcommand is the first of its known subcommands among its
// arguments (an option's value, `--dir D`, `--context C`, is never one of
// them), so no table of the options that take a value is needed.
func subcommand(args []string, words ...string) int {
	return slices.IndexFunc(args, func(a string) bool { return slices.Contains(words, a) })
}

func parsePnpm(prog string, args []string) (launch, bool) {
	name := "pnpx"
	if prog == "pnpm" {
		if subcommand(args, "dlx") < 0 {
			return launch{}, false
		}
		name = "pnpm dlx"
	}
	return launch{name: name, mode: spawns, exits: true, sameCwd: true}, true
}

func parseYarn(_ string, args []string) (launch, bool) {
	if subcommand(args, "dlx") < 0 {
		return launch{}, false
	}
	return launch{name: "yarn dlx", mode: spawns, exits: true}, true
}

func parseBun(prog string, args []string) (launch, bool) {
	switch {
	case prog == "bunx":
		return launch{name: "bunx", mode: spawns, exits: true, sameCwd: true}, true
	case len(args) > 0 && args[0] == "x":
		return launch{name: "bun x", mode: spawns, exits: true, sameCwd: true}, true
	}
	return launch{}, false
}

func parseUvx(_ string, args []string) (launch, bool) {
	return launch{name: "uvx", mode: execs, next: append([]string{"uv", "tool", "uvx"}, args...), exits: true}, true
}

func parseUv(_ string, args []string) (launch, bool) {
	l := launch{mode: spawns, exits: true, sameCwd: true}
	i := subcommand(args, "run", "tool")
	if i < 0 {
		return launch{}, false
	}
	for j, a := range args[:i] {
		if d, ok := strings.CutPrefix(a, "--directory="); ok {
			l.dir = filepath.Join(l.dir, d)
		} else if a == "--directory" && j+1 < i {
			l.dir = filepath.Join(l.dir, args[j+1])
		}
	}
	switch {
	case args[i] == "run":
		l.name = "uv run"
	case i+1 < len(args) && args[i+1] == "uvx":
		l.name = "uvx"
	case i+1 < len(args) && args[i+1] == "run":
		l.name = "uv tool run"
	default:
		return launch{}, false
	}
	return l, true
}

// pipx run's options that take a value.
var pipxValues = setOf(`--spec --python --pip-args --index-url -i --backend`)

func parsePipx(_ string, args []string) (launch, bool) {
	if len(args) == 0 || args[0] != "run" {
		return launch{}, false
	}
	l := launch{name: "pipx run", mode: execs, exits: true}
	if i := skipOptions(args[1:], pipxValues) + 1; i < len(args) {
		// pipx execs <venv>/bin/APP; a versioned spec (app==1.2) names
		// the app before its version.
		app := args[i]
		if j := strings.IndexAny(app, "=<>!~[@;"); j > 0 {
			app = app[:j]
		}
		l.next = append([]string{app}, args[i+1:]...)
	}
	return l, true
}

// envValues are env's options that take a value.
var envValues = setOf(`-u --unset -C --chdir -S --split-string`)

func parseEnv(_ string, args []string) (launch, bool) {
	l := launch{name: "env", mode: execs, exits: true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			rest := args[i+1:]
			for len(rest) > 0 && isAssignment(rest[0]) {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return launch{}, false
			}
			l.next = rest
			return l, true
		case isOption(a):
			name, value, eq := strings.Cut(a, "=")
			if !strings.HasPrefix(a, "--") && len(a) > 2 && (a[1] == 'u' || a[1] == 'C' || a[1] == 'S') {
				name, value, eq = a[:2], a[2:], true // -uNAME, -CDIR, -SSTRING
			}
			if !eq && envValues[name] && i+1 < len(args) {
				i++
				value = args[i]
			}
			switch name {
			case "-C", "--chdir":
				l.dir = filepath.Join(l.dir, value)
			case "-S", "--split-string":
				words, ok := literalWords(value)
				if !ok {
					return launch{}, false
				}
				args = append(append(args[:i+1:i+1], words...), args[i+1:]...)
			}
		case isAssignment(a):
		default:
			l.next = args[i:]
			return l, true
		}
	}
	return launch{}, false // env alone prints the environment
}

// isAssignment: NAME=value.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func parseContainer(prog string, args []string) (launch, bool) {
	if i := subcommand(args, "run", "exec"); i >= 0 {
		return launch{name: prog + " " + args[i], mode: contained, exits: true}, true
	}
	return launch{}, false
}

// shellSpecial are the bytes after which a shell reads a script as more
// than plain words: quotes, expansions, globs, operators, redirections,
// comments, a second line.
const shellSpecial = "'\"\\$`*?[]{}~;|&()<>#\n"

// literalWords splits s at blanks into the words a shell takes as they
// are; ok is false when s holds anything else (shellSpecial) or no word.
func literalWords(s string) ([]string, bool) {
	if strings.ContainsAny(s, shellSpecial) {
		return nil, false
	}
	words := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
	return words, len(words) > 0
}

// literalScript reads a script of the form `[cd DIR &&] [exec] CMD ARGS`,
// every word literal: the shell runs CMD ARGS (next) in DIR and exits
// when it does. ok is false for any other script.
func literalScript(s string) (next []string, dir string, ok bool) {
	if cd, rest, found := strings.Cut(s, "&&"); found {
		w, ok := literalWords(cd)
		if !ok || len(w) != 2 || w[0] != "cd" || w[1] == "-" {
			return nil, "", false
		}
		dir, s = w[1], rest
	}
	next, ok = literalWords(s)
	if ok && next[0] == "exec" {
		next = next[1:] // exec -a NAME (an option) renames argv[0]: refused below
	}
	if !ok || len(next) == 0 || isOption(next[0]) || isAssignment(next[0]) {
		return nil, "", false
	}
	return next, dir, true
}

// parseShell reads `sh [options] -c SCRIPT [NAME ARGS...]`: a literal
// script's command is what the shell runs (literalScript); any other
// script leaves the shell as the launcher to watch. A shell running a
// script file (`bash run.sh`) runs an unknown script: a launcher that
// may not exit with its server.
func parseShell(prog string, args []string) (launch, bool) {
	if prog == "busybox" {
		if len(args) == 0 || args[0] != "sh" && args[0] != "ash" {
			return launch{}, false
		}
		prog, args = args[0], args[1:]
	}
	sawC := false
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' && a[0] != '+' {
			break
		}
		switch {
		case a == "-o" || a == "+o" || a == "--rcfile" || a == "--init-file":
			i++
		case !strings.HasPrefix(a, "--") && strings.ContainsRune(a, 'c'):
			sawC = true
		}
	}
	if i >= len(args) {
		return launch{}, false // an interactive shell
	}
	if !sawC {
		return launch{name: prog + " script", mode: spawns}, true
	}
	next, dir, ok := literalScript(args[i])
	return launch{name: prog + " -c", mode: spawns, next: next, dir: dir, exits: ok}, true
}
