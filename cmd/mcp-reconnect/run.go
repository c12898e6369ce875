package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/launch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

// runV2 wraps an OpenCode 2 command that attaches to the user's shared
// background service (launch.Decide: the TUI, run, mcp, api, session,
// …, serve --service), and starts it when none runs, so there is no child
// server to manage. It makes sure one daemon watches that service
// (starting one, detached, when the registry holds none, with the daemon
// flags typed for this run: typed) and then gets out of the way: this
// process becomes the command.
//
// The directories run is given (--directory) are the service's alone:
// the daemon that watches it, started now or running already, is asked
// to keep them (armInServiceWatch), as if given with --directory, in the
// service only. They are never that daemon's own --directory, which
// would arm them in every server it watches (the config file's
// [[opencode]] tables too).
func runV2(cmd *cobra.Command, f *watchFlags, typed map[string]bool, args []string, log *slog.Logger) error {
	file := cmp.Or(f.service, defaultServiceFile())
	config := ""
	if cmd.Flags().Changed("config") {
		config = f.config
	}
	dirs, dirErr := daemon.PhysicalDirs(f.directories)
	reg, err := registry.Default()
	var self string
	if err == nil {
		self, err = os.Executable()
	}
	if err == nil {
		var started bool
		spawn := spawnServiceWatch(self, file, f.logFile, config, serviceDaemonArgs(cmd.Flags(), typed))
		started, err = daemon.EnsureServiceWatch(cmd.Context(), reg, file, spawn, 5*time.Second)
		if started {
			log.Info("started a daemon for the OpenCode 2 service", "file", file)
		}
	}
	if err == nil && len(dirs) > 0 {
		err = armInServiceWatch(cmd.Context(), reg, file, dirs)
	}
	if err = errors.Join(dirErr, err); err != nil {
		// The user's command matters more than the watch: say why, on
		// the terminal too (the log is a file), and start it all the same.
		log.Warn("the OpenCode 2 service is not watched as asked", "err", err)
		fmt.Fprintln(cmd.ErrOrStderr(), "mcp-reconnect:", termsafe.Text(err.Error()))
	}
	return launch.Exec(args, os.Environ())
}

// armInServiceWatch asks the daemon that watches the OpenCode 2 service
// (daemon.ServiceDaemon: the one run counted when it started none) to
// keep the directories run was given (--directory, physical) in the
// service, named as that daemon knows it: it may watch other servers
// too. The error says which were not armed, and why.
func armInServiceWatch(ctx context.Context, reg *registry.Registry, file string, dirs []string) error {
	e, req, ok, err := daemon.ServiceDaemon(reg, file)
	if err == nil && !ok {
		err = errors.New("no daemon watches it")
	}
	if err != nil {
		return fmt.Errorf("--directory %s not armed in the OpenCode 2 service: %w", strings.Join(dirs, ", "), err)
	}
	c := &statusapi.Client{Addr: e.StatusAddr, Token: e.Token}
	var errs []error
	for _, d := range dirs {
		req.Directory, req.Keep = d, true
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.Reconnect(rctx, req)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("--directory %s not armed in the OpenCode 2 service by its daemon (pid %d): %w", d, e.PID, err))
		}
	}
	return errors.Join(errs...)
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
port and adds it (and picks another if some other program takes it first)
to a command that serves: the TUI (no subcommand, or a project directory),
serve or web. A subcommand OpenCode 1.18 knows stays one beside a folder of
its name ("opencode models" is the models command), and another bare word
is a project only when it names a directory. The credentials reach the
child in the environment, never on the command line:
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
registry of running daemons holds none, with the daemon flags given to run;
that daemon outlives the command, as the service does, and is not its
child), asks it to keep each --directory in the service alone (saying so
on the terminal when it cannot), and then becomes COMMAND.
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
			typed := map[string]bool{}
			cmd.Flags().Visit(func(fl *pflag.Flag) { typed[fl.Name] = true })
			if err := f.load(cmd.Flags()); err != nil {
				return err
			}
			cfg, err := f.daemonConfig()
			if err != nil {
				return err
			}
			cfg.StatusAddrFallback = !typed["status-addr"]
			log, closeLog, err := f.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeLog()
			cred := launch.Credentials{Password: f.password, Username: f.username}
			if launch.IsOpenCode(args[0]) {
				// The generation decides, unless the command line starts
				// nothing on either (--help, --version).
				act1, act2 := launch.Decide(args[1:], 1, launch.IsDir), launch.Decide(args[1:], 2, launch.IsDir)
				if act1 != launch.PassThrough || act2 != launch.PassThrough {
					// Once per binary (remembered).
					major, cached, err := launch.DefaultVersions().Major(cmd.Context(), args[0], os.Environ())
					if err != nil {
						log.Debug("could not tell the OpenCode generation; wrapping it as 1.x", "err", err)
					} else {
						log.Debug("opencode generation", "major", major, "remembered", cached)
					}
					switch {
					case err != nil || major < 2:
					case act2 == launch.ServiceClient:
						return runV2(cmd, &f, typed, args, log)
					case act2 == launch.PassThrough:
						// Nothing of the service's, or a server nobody else
						// can reach (--standalone): the command as it is.
						return launch.Exec(args, os.Environ())
					default:
						// A 2.x serve is a server of its own: supervised and
						// watched as on 1.x, with 2.x's password rules: it
						// reads OPENCODE_PASSWORD, then
						// OPENCODE_SERVER_PASSWORD, so a password that came
						// from the environment is left for NewPlan to find in
						// that order; one given by flag or config file is the
						// child's. The user is always "opencode".
						cred = launch.Credentials{Password: f.password, Major: 2}
						if strings.HasPrefix(f.passwordSource, "env ") {
							cred.Password = ""
						}
						if f.username != "" && f.username != launch.DefaultUsername {
							log.Warn("OpenCode 2 authenticates as \"opencode\"; the configured username is not used", "username", f.username)
						}
					}
				}
			}
			plan, err := launch.NewPlan(args, os.Environ(), cred)
			if err != nil {
				return err
			}
			code, err := daemon.Managed(cmd.Context(), plan, cfg, startTimeout, log)
			if err != nil {
				// The error can carry the child's last output: data, not terminal control.
				fmt.Fprintln(cmd.ErrOrStderr(), "mcp-reconnect:", termsafe.Text(err.Error()))
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
