package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/doctor"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

func newDoctor() *cobra.Command {
	var f watchFlags
	var asJSON, reapFlag, yesFlag bool
	cmd := &cobra.Command{
		Use:   "doctor [--url URL] [--directory D] [--reap [--yes]]",
		Short: "Check that mcp-reconnect can reach, authenticate to and use this OpenCode",
		Long: `doctor checks that the OpenCode server is reachable, accepts the credentials,
runs a version mcp-reconnect knows (it says which generation, 1.x or 2.x,
and where the password came from, never the password), and still offers
(in its own API description: 1.x GET /doc, 2.x GET /openapi.json) every
route, parameter, MCP status and event the daemon relies on. With no --url
and no password it checks the OpenCode 2 background service watch would
follow, if one is registered (service.json's when it answers, else the
newest service-<channel>.json whose service answers), and names its file
and the other services that answer. It then lists the
MCP servers that need attention: those the running daemon sees in armed
directories, and those of each --directory (reading a directory's status
starts its MCP servers, so only the ones you name are read).

Then, on this machine and for this user, whether OpenCode answers or not
and without a daemon, it lists MCP processes left over by an OpenCode that
is gone, and servers that run twice under one live OpenCode. A process is
an orphan only with evidence that an OpenCode started it: a daemon saw it
serve a server under that OpenCode (the record in
$XDG_STATE_HOME/mcp-reconnect/processes), it is still in that OpenCode's
process group, or its OPENCODE_PID (OpenCode 1.14 and later) names that
OpenCode and its group; being adopted by init or systemd proves nothing
(every service is). One that only runs a configured command is "possibly
left over", shown with why it is not proven, and never ended. All come
with pids and the command line with secrets masked (never the
environment, never header values). The servers are read from the config
files OpenCode reads in each --directory, each directory the daemons have
armed, and the working directory of each adopted process and of each
OpenCode's children. Both are warnings. A duplicate names its newer pid:
restart OpenCode, or kill the older one; it is never reaped, its
OpenCode still runs.

--reap ends the proven orphans instead of checking OpenCode, with what
runs below each (an npx's shell and node): only processes of this user,
each checked again right before every signal (same pid and start time,
still proven; SIGTERM, SIGKILL after 5 s). It asks before each one on
the terminal; without a terminal it refuses unless --yes is given, which
ends every such orphan without asking. It prints what it ended and what it
left, and why. --reap and --yes are read from the command line only (never
$MCP_RECONNECT_REAP or $MCP_RECONNECT_YES, nor the config file).

A password is not sent to a plain-http URL whose host is not loopback
unless --allow-http-password is given (basic auth over plain http is
readable on the network).

It exits 0 only when nothing failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Ending processes is asked for on the command line each
			// time: taken before the environment and the config file
			// are applied to the flags.
			reap, yes := reapFlag, yesFlag
			if err := f.load(cmd.Flags()); err != nil {
				return err
			}
			if yes && !reap {
				return errors.New("--yes is for --reap: it ends every proven orphan without asking")
			}
			if reap && asJSON {
				return errors.New("--json is not for --reap: it asks and reports on the terminal")
			}
			if _, err := opencode.New(f.urls[0], opencode.Options{}); err != nil {
				return err // a bad URL, said before any request
			}
			dirs, err := daemon.PhysicalDirs(f.directories)
			if err != nil {
				return err
			}
			o := doctor.Options{Directories: dirs, PasswordSource: f.passwordSource, ProcessTable: procview.System, UID: os.Getuid()}
			if rec, err := procview.DefaultRecord(); err == nil {
				o.Record = &rec
			}
			if f.statusAddr != "" {
				o.Daemon = &statusapi.Client{Addr: f.statusAddr}
			}
			if reg, err := registry.Default(); err == nil {
				if ents, err := reg.List(); err == nil {
					for _, e := range ents {
						o.Daemons = append(o.Daemons, &statusapi.Client{Addr: e.StatusAddr, Token: e.Token})
					}
				}
			}
			if reap {
				return reapOrphans(cmd, o, yes)
			}
			url, password := f.urls[0], f.password
			var first []doctor.Check
			if svc, check, err := f.doctorService(cmd.Context(), cmd.Flags()); err != nil {
				return err
			} else if svc.Path != "" {
				url, password = svc.URL, svc.Password()
				o.PasswordSource = "service file " + svc.Path
				first = append(first, check)
			} else if password != "" && !f.allowHTTPPassword {
				if err := checkPlainHTTP(url); err != nil {
					return err // before the password is sent anywhere
				}
			}
			checks := append(first, doctor.Run(cmd.Context(), url, opencode.Options{Username: f.username, Password: password}, o)...)
			if asJSON {
				if err := writeIndentedJSON(cmd.OutOrStdout(), checks); err != nil {
					return err
				}
			} else {
				doctor.Write(cmd.OutOrStdout(), checks)
			}
			if !doctor.Healthy(checks) {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	f.registerOptIns(cmd.Flags(), false)
	for _, name := range []string{"initial-delay", "max-delay", "idle-interval", "jitter", "max-concurrent", "fast-attempts", "slow-interval", "log-level", "log-format", "log-file", "status-public", "probe", "toast", "netwatch"} {
		_ = cmd.Flags().MarkHidden(name)
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	cmd.Flags().BoolVar(&reapFlag, "reap", false, "end the orphaned MCP processes of this user, asking before each one (the OpenCode checks are skipped)")
	cmd.Flags().BoolVar(&yesFlag, "yes", false, "with --reap: end every proven orphan without asking (needed without a terminal)")
	return cmd
}

// doctorService is the OpenCode 2 service doctor checks, as watch would
// follow it: the one --service-file names; or, with neither a URL nor a
// password given, the default service.json's or another channel's
// service-<channel>.json's whose service answers (service.json first,
// then the newest: daemon.ChooseService), else the first of them that
// exists, to say why it does not answer. None (Path "") leaves the URL.
// The check says which file, and the other services that answer.
func (f *watchFlags) doctorService(ctx context.Context, flags *pflag.FlagSet) (opencode.Service, doctor.Check, error) {
	file, channels := f.followService(flags), f.service == ""
	if file == "" {
		return opencode.Service{}, doctor.Check{}, nil
	}
	svc, others, err := daemon.ChooseService(ctx, file, channels)
	switch {
	case err == nil:
		detail := fmt.Sprintf("%s (pid %d, version %s)", svc.Path, svc.PID, svc.Version)
		if len(others) > 0 {
			detail += "; also running, not checked here: " + strings.Join(others, ", ") + " (--service-file FILE checks another; a daemon follows one: one watch --service-file FILE each)"
		}
		return svc, doctor.Check{Severity: doctor.OK, Name: "service", Detail: detail}, nil
	case errors.Is(err, opencode.ErrUnauthorized) && svc.Path != "":
		return svc, doctor.Check{Severity: doctor.OK, Name: "service", Detail: svc.Path + " (its service refuses the password it registers)"}, nil
	case errors.Is(err, fs.ErrNotExist) && !channels:
		return opencode.Service{}, doctor.Check{}, fmt.Errorf("the OpenCode 2 service file: %w (pass --url to check another server)", err)
	case errors.Is(err, fs.ErrNotExist):
		return opencode.Service{}, doctor.Check{}, nil // no service registered: the 1.x default
	}
	regs, _ := opencode.Registrations(file, channels)
	for _, r := range regs {
		if s, rerr := opencode.ReadServiceFile(r.Path); rerr == nil {
			return s, doctor.Check{Severity: doctor.Warn, Name: "service", Detail: "no registered OpenCode 2 service answers (" + err.Error() + "); checking " + r.Path}, nil
		}
	}
	return opencode.Service{}, doctor.Check{}, fmt.Errorf("the OpenCode 2 service file: %w (pass --url to check another server)", err)
}

// reapOrphans is doctor --reap: list the processes, then end the proven
// orphans, asking on the terminal unless --yes.
func reapOrphans(cmd *cobra.Command, o doctor.Options, yes bool) error {
	ro := doctor.ReapOptions{Yes: yes, Prompt: cmd.ErrOrStderr(), Report: cmd.OutOrStdout()}
	if in, ok := cmd.InOrStdin().(*os.File); ok && doctor.IsTerminal(in.Fd()) {
		ro.In = in
	}
	if err := ro.Allowed(); err != nil {
		return err
	}
	found, checks := doctor.FindProcesses(cmd.Context(), o)
	doctor.Write(cmd.OutOrStdout(), checks)
	return doctor.Reap(cmd.Context(), found, ro)
}
