package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On 1.x the TUI, a project and the servers serve; every other command
// line is passed through. A subcommand 1.18 knows is one whatever the
// file system holds; a bare word no list knows is a project only when it
// names a directory (else a subcommand of a later release).
func TestDecideOn1x(t *testing.T) {
	dir := t.TempDir()
	// A repository holding folders named like subcommands, and a project.
	for _, sub := range []string{"models", "run", "serve", "service", "shop"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for args, want := range map[string]Action{
		"":                                  Serve, // the TUI
		"serve":                             Serve,
		"web --port 5000":                   Serve,
		"--log-level DEBUG serve --service": Serve,
		"--port 5000":                       Serve,
		"--model openai/x":                  Serve,
		"-m openai/x":                       Serve,
		"--log-level DEBUG serve":           Serve,
		"--cors http://a serve":             Serve,
		"--cors http://a models":            PassThrough,
		"--mdns false models":               PassThrough,
		"--print-logs models":               PassThrough,
		"--print-logs run hi":               PassThrough,
		"-m openai/gpt run hi":              PassThrough,
		"--replay-limit 5 stats":            PassThrough,
		"--mini --continue":                 Serve,
		"--agent build ~/src/p":             Serve,
		dir:                                 Serve, // a project directory
		".":                                 Serve,
		"../p":                              Serve,
		"/does/not/exist":                   Serve, // still the [project] positional
		"some/project":                      Serve,
		"Projects":                          Serve, // no subcommand is named with capitals
		"shop":                              Serve, // ./shop: a project
		"--port 1 shop":                     Serve,
		"share ses_1":                       PassThrough, // no ./share: a later release's subcommand
		"migrate":                           PassThrough,
		"--unknown share":                   Serve, // yargs gives an unknown flag the word after it
		"mcp auth github":                   PassThrough,
		"--version":                         PassThrough,
		"-h":                                PassThrough,
		"~/p --help":                        PassThrough,
		"--session --help":                  PassThrough, // a flag after a value flag is a flag
		"run hello":                         PassThrough,
		"run":                               PassThrough, // with ./run present
		"models":                            PassThrough, // with ./models present
		"models openai":                     PassThrough,
		"attach http://127.0.0.1:1":         PassThrough,
		"acp":                               PassThrough,
		"pr 5":                              PassThrough,
		"auth login":                        PassThrough,
		"db":                                PassThrough,
		"upgrade":                           PassThrough,
		"--port=5000 " + dir:                Serve,
		"-- models":                         Serve,       // after --, a project named models
		"service start":                     PassThrough, // 2.x's service subcommand, with ./service present
	} {
		if got := Decide(strings.Fields(args), 1, IsDir); got != want {
			t.Errorf("Decide(%q, 1) = %v, want %v", args, got, want)
		}
	}
}

// On OpenCode 2 every command that needs a server attaches to the
// background service and starts it when none runs (measured on 2.1.2):
// ServiceClient, whatever the subcommand, a later release's included; a
// serve of its own is Serve; help, version, the service's own commands
// but start and restart, upgrade and the private servers (--standalone,
// acp, serve --stdio, --server URL) pass through. The file system is
// never asked.
func TestDecideOn2x(t *testing.T) {
	for args, want := range map[string]Action{
		"":                                   ServiceClient, // the TUI
		"~/src/p":                            ServiceClient,
		"mcp list":                           ServiceClient,
		"run hello":                          ServiceClient,
		"run --model x/y hello":              ServiceClient,
		"api GET /api/info":                  ServiceClient,
		"session list":                       ServiceClient,
		"models":                             ServiceClient,
		"mini":                               ServiceClient,
		"debug config":                       ServiceClient,
		"share ses_1":                        ServiceClient, // a subcommand 2.1.2 lacks
		"--log-level debug mcp list":         ServiceClient,
		"--continue":                         ServiceClient,
		"-s ses_1":                           ServiceClient,
		"--auto serve":                       Serve, // a 2.x boolean takes no value
		"serve --service":                    ServiceClient,
		"serve --service=true":               ServiceClient,
		"--log-level debug serve --service":  ServiceClient,
		"service start":                      ServiceClient,
		"service restart":                    ServiceClient,
		"--log-level debug service start":    ServiceClient,
		"serve":                              Serve,
		"serve --port 4096":                  Serve,
		"serve --service=false":              Serve,
		"serve -- --service":                 Serve,
		"serve --stdio --port 0":             PassThrough,
		"service stop":                       PassThrough,
		"service status":                     PassThrough,
		"service set port 5000":              PassThrough,
		"service":                            PassThrough,
		"--log-level debug service stop":     PassThrough,
		"upgrade":                            PassThrough,
		"update 2.1.3":                       PassThrough,
		"uninstall":                          PassThrough,
		"acp":                                PassThrough,
		"--help":                             PassThrough,
		"-h":                                 PassThrough,
		"mcp --help":                         PassThrough,
		"--version":                          PassThrough,
		"-v":                                 PassThrough,
		"--completions bash":                 PassThrough,
		"--standalone":                       PassThrough,
		"run --standalone hello":             PassThrough,
		"models --server http://127.0.0.1:1": PassThrough,
		"--server=http://127.0.0.1:1":        PassThrough,
		"-- --help":                          ServiceClient, // a project named --help
		"--session serve":                    ServiceClient, // a session named serve
		"--session --help":                   PassThrough,
	} {
		isDir := func(string) bool { t.Errorf("Decide(%q, 2) asked the file system", args); return false }
		if got := Decide(strings.Fields(args), 2, isDir); got != want {
			t.Errorf("Decide(%q, 2) = %v, want %v", args, got, want)
		}
	}
}

// Whatever the command line, Decide decides without panicking, never
// takes a command line that asks for help or version (or, on 2.x, names
// a private server) for one to watch, and asks the file system only
// about a bare word on 1.x.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{"", "mcp list", "serve --service", "--log-level debug service stop", "run --standalone hi", "-- --help", "serve --stdio", "shop", "--unknown x models"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		for major := 1; major <= 2; major++ {
			act := Decide(args, major, func(p string) bool {
				if major == 2 || !bareWord.MatchString(p) || subcommands[p] {
					t.Fatalf("Decide(%q, %d) asked about %q", args, major, p)
				}
				return len(p)%2 == 0
			})
			if act != PassThrough && act != Serve && (act != ServiceClient || major != 2) {
				t.Fatalf("Decide(%q, %d) = %v", args, major, act)
			}
			for _, a := range args {
				if a == "--" {
					break
				}
				if (a == "--help" || a == "--version" || major == 2 && a == "--standalone") && act != PassThrough {
					t.Fatalf("Decide(%q, %d) = %v, want PassThrough", args, major, act)
				}
			}
		}
	})
}
