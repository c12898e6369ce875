package launch

import (
	"os"
	"regexp"
	"strings"
)

// Action is what the wrapper does with an OpenCode command line.
type Action int

// The actions Decide chooses between.
const (
	// PassThrough: nothing to watch (a subcommand that is no server,
	// --help, --version, a private server): the command as it is.
	PassThrough Action = iota
	// Serve: the command serves (the 1.x TUI, a project, serve, web; a
	// 2.x serve of its own): supervised, with a --port when it has none.
	Serve
	// ServiceClient: an OpenCode 2 command that attaches to the user's
	// background service, and starts it when none runs: the service
	// watch is ensured, then the command runs as it is.
	ServiceClient
)

// Decide reads an OpenCode command line (the arguments after the command
// name) by the rules of OpenCode's major version.
//
// 1.x: the first positional word is a subcommand if it names one, else
// it is the TUI's project directory. serve, web, the TUI and a project
// Serve; --help, --version and every other subcommand PassThrough. A
// subcommand 1.18 knows is one whatever the file system holds (a models/
// folder never hides `opencode models`); a bare word no list knows is a
// project only when it names a directory (isDir), else a subcommand of a
// later release. A path that is no bare word ("~/p", "../p", "Projects")
// is a project.
//
// 2.x: every command that needs a server attaches to the background
// service and starts it when none runs (measured on 2.1.2: the TUI, run,
// mcp, api, session, models, stats, auth, plugin, debug config, reload,
// pair, service start): ServiceClient whatever its subcommand, a later
// release's included. PassThrough: --help, --version, --completions
// (nothing starts), --standalone (a private server, whose password only
// it knows: docs/guide.md), --server URL (another server), acp and serve
// --stdio (private servers too), upgrade, update, uninstall, and the
// service's own commands but start and restart. serve without --service
// is a Serve of its own.
func Decide(args []string, major int, isDir func(string) bool) Action {
	v2 := major >= 2
	var words []string // the positionals before "--"
	service, stdio := false, false
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			words = append(words, a)
			continue
		}
		name, _, valued := strings.Cut(strings.TrimLeft(a, "-"), "=")
		next := i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") // a flag after it is a flag
		switch {
		case name == "help" || name == "h" || name == "version" || name == "v":
			return PassThrough
		case v2 && (name == "completions" || name == "standalone" || name == "server"):
			return PassThrough
		case v2 && name == "service":
			service = !valued || a == "--service=true"
		case v2 && name == "stdio":
			stdio = true
		case valued:
		case valueFlags[name], !v2 && !boolFlags[name] && next:
			// Its value is no subcommand. yargs (1.x) gives an unknown
			// flag the word after it.
			if next {
				i++
			}
		case boolFlags[name] && next && (args[i+1] == "true" || args[i+1] == "false"):
			i++ // yargs takes "--mdns false" as the boolean's value
		}
	}
	words = append(words, "", "")
	if v2 {
		switch words[0] {
		case "serve":
			if service {
				return ServiceClient
			}
			if stdio {
				return PassThrough
			}
			return Serve
		case "service":
			if words[1] == "start" || words[1] == "restart" {
				return ServiceClient
			}
			return PassThrough
		case "acp", "upgrade", "update", "uninstall":
			return PassThrough
		}
		return ServiceClient
	}
	switch w := words[0]; {
	case w == "serve" || w == "web" || w == "":
		return Serve
	case subcommands[w], bareWord.MatchString(w) && !isDir(w):
		return PassThrough
	}
	return Serve
}

// IsDir reports whether path names a directory: Decide's question for a
// bare word no list knows.
func IsDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// bareWord is what a subcommand's name looks like; a path does not.
var bareWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// subcommands are OpenCode 1.18's (`opencode --help`), aliases included,
// and 2.x's service (a 1.x folder named service is passed through: 2.x's
// subcommand is never taken for a project).
var subcommands = map[string]bool{
	"service":    true,
	"completion": true, "acp": true, "mcp": true, "attach": true, "run": true, "debug": true,
	"providers": true, "auth": true, "agent": true, "upgrade": true, "uninstall": true,
	"serve": true, "web": true, "models": true, "stats": true, "export": true, "import": true,
	"github": true, "pr": true, "session": true, "plugin": true, "plug": true, "db": true,
}

// valueFlags are the flags that take a value and may come before a
// subcommand: OpenCode 1.18's global and TUI flags (yargs arrays such as
// --cors take one per occurrence: OpenCode's yargs is not greedy,
// measured with `opencode --cors x completion`) and 2.1.2's.
var valueFlags = map[string]bool{
	"port": true, "hostname": true, "log-level": true, "model": true, "m": true, "session": true, "s": true,
	"prompt": true, "agent": true, "cors": true, "mdns-domain": true, "replay-limit": true,
}

// boolFlags are OpenCode 1.18's flags that take no value.
var boolFlags = map[string]bool{
	"print-logs": true, "pure": true, "mdns": true, "continue": true, "c": true, "fork": true,
	"auto": true, "mini": true, "no-replay": true, "replay": true,
}
