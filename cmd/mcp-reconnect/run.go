package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/launch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

// runV2 wraps an OpenCode 2 command that attaches to the user's shared
// background service (launch.KindOfV2: the TUI, run, mcp, api, session,
// …, serve --service), and starts it when none runs, so there is no child
// server to manage. It makes sure one daemon watches that service
// (starting one, detached, when the registry holds none) and then gets
// out of the way: this process becomes the command.
//
// The directories run is given (--directory) are the daemon's own
// --directory when run starts it: armed for good, as on 1.x. The command
// usually starts the service after that daemon, and a daemon forgets the
// directories it was merely asked to arm when the service it follows
// (re)starts. One that runs already is asked to arm them
// (armInServiceWatch).
func runV2(cmd *cobra.Command, f *watchFlags, args []string, log *slog.Logger) error {
	file := cmp.Or(f.service, defaultServiceFile())
	config := ""
	if cmd.Flags().Changed("config") {
		config = f.config
	}
	dirs := physicalDirs(f.directories, log)
	reg, err := registry.Default()
	var self string
	if err == nil {
		self, err = os.Executable()
	}
	var started bool
	if err == nil {
		started, err = daemon.EnsureServiceWatch(cmd.Context(), reg, file, spawnServiceWatch(self, file, f.logFile, config, dirs), 5*time.Second)
		if started {
			log.Info("started a daemon for the OpenCode 2 service", "file", file, "directories", len(dirs))
		}
	}
	if err != nil {
		// The user's command matters more than the watch: say why in the
		// log and start it all the same.
		log.Warn("the OpenCode 2 service is not watched", "err", err)
	} else if len(dirs) > 0 && !started {
		armInServiceWatch(cmd.Context(), reg, file, dirs, log)
	}
	return launch.Exec(args, os.Environ())
}

// physicalDirs are dirs as a TUI started in each would name it
// (daemon.PhysicalDir); one that cannot be resolved is left out, and the
// log says so.
func physicalDirs(dirs []string, log *slog.Logger) []string {
	var out []string
	for _, d := range dirs {
		abs, err := daemon.PhysicalDir(d)
		if err != nil {
			log.Warn("a --directory is not watched", "directory", d, "err", err)
			continue
		}
		out = append(out, abs)
	}
	return out
}

// armInServiceWatch asks the daemon that watches the OpenCode 2 service
// to arm the directories run was given (--directory, physical): it is
// shared by every TUI and was started with none of them.
func armInServiceWatch(ctx context.Context, reg *registry.Registry, file string, dirs []string, log *slog.Logger) {
	ents, err := reg.List()
	if err != nil {
		log.Warn("the --directory directories are not armed", "err", err)
		return
	}
	for _, e := range ents {
		if e.Service != file {
			continue
		}
		c := &statusapi.Client{Addr: e.StatusAddr, Token: e.Token}
		for _, d := range dirs {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.Reconnect(rctx, statusapi.ReconnectRequest{Directory: d, Keep: true})
			cancel()
			if err != nil {
				log.Warn("could not arm a --directory in the service's daemon", "directory", d, "err", err)
			}
		}
		return
	}
}

// v2Credentials are the credentials of an OpenCode 2 server that run
// starts: 2.x reads OPENCODE_PASSWORD, then OPENCODE_SERVER_PASSWORD, so
// a password that came from the environment is left for NewPlan to find
// in that order; one given by flag or config file is the child's. The
// user is always "opencode".
func v2Credentials(f *watchFlags, log *slog.Logger) launch.Credentials {
	c := launch.Credentials{Password: f.password, Major: 2}
	if strings.HasPrefix(f.passwordSource, "env ") {
		c.Password = ""
	}
	if f.username != "" && f.username != launch.DefaultUsername {
		log.Warn("OpenCode 2 authenticates as \"opencode\"; the configured username is not used", "username", f.username)
	}
	return c
}

func newRun() *cobra.Command {
	var f watchFlags
	var startTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Launch OpenCode and keep its MCP servers connected while it runs",
		Long: `run starts COMMAND (OpenCode: the TUI, opencode serve or opencode web) and
watches it until it exits, then exits with its exit code (128+N when signal N
killed it). The terminal is the child's: the TUI works exactly as without
the wrapper, and the daemon logs to --log-file instead of the screen.
SIGTERM and SIGHUP sent to run reach the child; so do SIGINT and SIGQUIT,
unless run is the terminal's foreground job (then Ctrl-C and Ctrl-\ reach
the child from the terminal itself, once, and a SIGINT sent to run alone is
not relayed).

When COMMAND is OpenCode and ARGS have no --port, run picks a free loopback
port and adds it (and picks another if some other program takes it first).
Whether ARGS start a server (the TUI, serve, web) is read from OpenCode's
own subcommands, so "opencode models" stays the models command. The
credentials reach the child in the environment, never on the command line:
for 1.x the password as OPENCODE_SERVER_PASSWORD and --username as
OPENCODE_SERVER_USERNAME; for 2.x the password as OPENCODE_PASSWORD, which
2.x reads first, and as OPENCODE_SERVER_PASSWORD too (its user is always
"opencode").
When no password is set (--password, the config file, or those variables)
run generates a strong one, never printed, so no other local user can
drive the server. Other OpenCode subcommands (opencode mcp auth, --version,
…) pass through untouched.

The generation is what "COMMAND --version" prints. It is asked once per
binary and remembered in the user's cache directory
(mcp-reconnect/opencode-versions.json there) until the file COMMAND
resolves to changes (an upgrade, a re-pointed symlink, an npm install), so
a start costs no --version run.

OpenCode 2: "opencode serve", with or without --port, is a server of its
own, supervised and watched as on 1.x. Every other 2.x command that needs
a server (the TUI, run, mcp, api, session, models, …, "serve --service",
"service start") attaches to the user's shared background service, and
starts it when none runs: run then makes sure a daemon watches that
service (it starts "mcp-reconnect watch" in the background, once, when the
registry of running daemons holds none; that daemon outlives the command,
as the service does, and is not its child) and then becomes COMMAND.
--help, --version, upgrade, uninstall, "service stop" (and status, get,
set, unset), and the private servers of --standalone, --server URL and acp
are passed through, and start no daemon (docs/guide.md says why
--standalone cannot be watched).

This alias is all it takes, for either generation:

  alias opencode='mcp-reconnect run -- opencode'`,
		Example: `  mcp-reconnect run -- opencode
  mcp-reconnect run -- opencode serve --port 4096
  mcp-reconnect run --log-level debug -- opencode ~/src/project`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Ctrl-\ is the child's: never a goroutine dump of ours.
			launch.CatchQuit()
			if cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("put the command after --: mcp-reconnect run [flags] -- %s", args[0])
			}
			if !cmd.Flags().Changed("log-file") {
				f.logFile = defaultLogPath()
			}
			// Only a --status-addr typed for this run may fail it when the
			// address is taken: one from the config file or the
			// environment is shared by every wrapped TUI, and the second
			// one moves to a free port (the registry finds it).
			statusAddrTyped := cmd.Flags().Changed("status-addr")
			if err := f.load(cmd.Flags()); err != nil {
				return err
			}
			ec := f.engineConfig()
			if err := ec.Validate(); err != nil {
				return err
			}
			log, closeLog, err := f.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeLog()
			cred := launch.Credentials{Password: f.password, Username: f.username}
			if launch.IsOpenCode(args[0]) {
				kind, grammar, kind2 := launch.KindOf(args[1:]), launch.NeedsGrammar(args[1:]), launch.KindOfV2(args[1:])
				// An OpenCode 2 command attaches to the background service
				// whatever its subcommand: the generation is asked unless
				// the command line starts nothing on either (--help,
				// --version).
				if kind != launch.Other || grammar || kind2 != launch.Other {
					// Once per binary (remembered): its version and, when the
					// command line's first word may be a subcommand of this
					// 1.x release, its grammar.
					facts := launch.DefaultVersions().Facts(cmd.Context(), args[0], os.Environ(), grammar)
					major, err := facts.Major, facts.MajorErr
					v2 := err == nil && major >= 2
					switch {
					case v2:
						kind = kind2
					case grammar:
						if facts.GrammarErr != nil {
							log.Debug("could not read the OpenCode grammar; using 1.18's", "err", facts.GrammarErr)
						}
						kind = facts.Grammar.Kind(args[1:])
						cred.Grammar = &facts.Grammar
					}
					if err != nil {
						log.Debug("could not tell the OpenCode generation; wrapping it as 1.x", "err", err)
					} else {
						log.Debug("opencode generation", "major", major, "remembered", facts.Cached, "kind", kind)
					}
					switch {
					case v2 && kind == launch.Service:
						return runV2(cmd, &f, args, log)
					case v2 && kind == launch.Other:
						// Nothing of the service's, or a server nobody else
						// can reach (--standalone): the command as it is.
						return launch.Exec(args, os.Environ())
					case v2:
						// A 2.x serve is a server of its own: supervised and
						// watched as on 1.x, with 2.x's password rules.
						cred = v2Credentials(&f, log)
					}
				}
			}
			plan, err := launch.NewPlan(args, os.Environ(), cred)
			if err != nil {
				return err
			}
			code, err := daemon.Managed(cmd.Context(), plan, daemon.Config{
				Directories: f.directories, StatusAddr: f.statusAddr, StatusPublic: f.statusPublic,
				StatusAddrFallback: !statusAddrTyped, Engine: ec, NoProbes: !f.probe, NoToasts: !f.toast, NoNetwatch: !f.netwatch, Version: versionString(),
			}, startTimeout, launch.IO{}, log)
			if err != nil {
				// The error can carry the child's last output: data, not terminal control.
				fmt.Fprintln(cmd.ErrOrStderr(), "mcp-reconnect:", termsafe.Text(err.Error()))
				if code == 0 {
					code = 1
				}
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	_ = cmd.Flags().MarkHidden("url") // the URL is the child's
	cmd.Flags().DurationVar(&startTimeout, "start-timeout", daemon.DefaultStartTimeout, "how long OpenCode may take to answer as OpenCode (either generation) after it starts [$MCP_RECONNECT_START_TIMEOUT]")
	cmd.Flags().SetInterspersed(false)
	return cmd
}
