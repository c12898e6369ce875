package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/launch"
)

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

When COMMAND is OpenCode and ARGS have no --port, run picks a free loopback
port and adds it (and picks another if some other program takes it first).
Whether ARGS start a server (the TUI, serve, web) is read from OpenCode's
own subcommands, so "opencode models" stays the models command. When no password is set it generates a strong one and
passes it to the child as OPENCODE_SERVER_PASSWORD (never on the command
line, and never printed), so no other local user can drive the server.
Other OpenCode subcommands (opencode mcp auth, --version, …) pass through
untouched, so this alias is all it takes:

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
			plan, err := launch.NewPlan(args, os.Environ(), f.password)
			if err != nil {
				return err
			}
			code, err := daemon.Managed(cmd.Context(), plan, daemon.Config{
				Username: f.username, Directories: f.directories, StatusAddr: f.statusAddr, StatusPublic: f.statusPublic,
				StatusAddrFallback: !cmd.Flags().Changed("status-addr"), Engine: ec, NoProbes: !f.probe, NoToasts: !f.toast, NoNetwatch: !f.netwatch, Version: versionString(),
			}, startTimeout, launch.IO{}, log)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "mcp-reconnect:", err)
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
	cmd.Flags().DurationVar(&startTimeout, "start-timeout", daemon.DefaultStartTimeout, "how long OpenCode may take to answer /global/health after it starts [$MCP_RECONNECT_START_TIMEOUT]")
	cmd.Flags().SetInterspersed(false)
	return cmd
}
