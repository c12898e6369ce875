// Command mcp-reconnect keeps the MCP servers of an OpenCode server
// connected. See `mcp-reconnect --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

func main() {
	oneProc(os.Getenv)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitError carries an exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		// An error can quote OpenCode or an MCP server (a response body,
		// a server name): its layout stays, control characters do not.
		fmt.Fprintln(stderr, "mcp-reconnect:", termsafe.Text(err.Error()))
		return 1
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "mcp-reconnect",
		Short: "Keep the MCP servers of an OpenCode server connected",
		Long: `mcp-reconnect watches an OpenCode server and brings its failed MCP servers
back by itself, per project directory, with backoff, within a connect budget.

It only touches directories that are in use (reading MCP status starts MCP
servers in OpenCode), only retries servers OpenCode reports as "failed", and
never re-enables a server you disabled.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRun(), newWatch(), newStatus(), newReconnect(), newDoctor(), newVersion(), newService(), newMan())
	return root
}

// watchFlags are the flags shared by watch (and, later, run).
type watchFlags struct {
	// file is the config file load read (nil: none).
	file               *configFile
	urls               []string
	username, password string
	directories        []string
	statusAddr         string
	statusPublic       bool
	// engine holds the reconnect tunables, each bound to its flag.
	engine reconnect.Config
	// passwordSource says where the password came from (never the
	// password): "--password", "env …", "config file …", or "".
	passwordSource string
	// urlSource says where --url came from: "--url", "$OPENCODE_URL",
	// "the config file's url", or "" (not given).
	urlSource string
	// usernameFromEnv: --username came from $OPENCODE_SERVER_USERNAME.
	usernameFromEnv bool
	// service is --service-file: the OpenCode 2 service file to follow.
	service                string
	logLevel, logFormat    string
	logFile, config        string
	probe, toast, netwatch bool
	// allowDuplicate is watch --allow-duplicate.
	allowDuplicate bool
	// allowHTTPPassword is --allow-http-password (watch, doctor).
	allowHTTPPassword bool
}

func (f *watchFlags) register(fs *pflag.FlagSet) {
	f.engine = reconnect.DefaultConfig
	d, b := &f.engine, &f.engine.Backoff
	fs.StringArrayVar(&f.urls, "url", []string{defaultURL}, "OpenCode server URL; repeat to watch several, each with its own engine and event stream (one --password is refused for several: give per-server passwords with [[opencode]] tables and password-file in the config file) [$OPENCODE_URL]")
	fs.StringVar(&f.username, "username", "opencode", "HTTP basic auth user [$OPENCODE_SERVER_USERNAME]")
	fs.StringVar(&f.password, "password", "", "HTTP basic auth password, for one --url only, and refused for a plain-http URL that is not loopback unless --allow-http-password; prefer the environment or --password-file, a flag shows in ps [$OPENCODE_SERVER_PASSWORD]")
	fs.String(passwordFileFlag, "", "read the password from this file (only you may read it: chmod 600), e.g. a mounted secret [$MCP_RECONNECT_PASSWORD_FILE]")
	fs.StringArrayVar(&f.directories, "directory", nil, "project directory to watch from the start (repeatable) [$MCP_RECONNECT_DIRECTORY, colon-separated]")
	fs.StringVar(&f.statusAddr, "status-addr", "127.0.0.1:4097", "listen address of the daemon's status API; empty disables it [$MCP_RECONNECT_STATUS_ADDR]")
	fs.BoolVar(&f.statusPublic, "status-public", false, "allow a non-loopback --status-addr [$MCP_RECONNECT_STATUS_PUBLIC]")
	fs.DurationVar(&b.Initial, "initial-delay", b.Initial, "the first check after a directory is armed or woken (jittered downwards only), and the first gap between a failed server's attempts, doubling after each: with the defaults attempts land 1, 2, 4, 8 and 16 s after arming; a first crash is connected at once, then 1, 3, 7 and 15 s later [$MCP_RECONNECT_INITIAL_DELAY]")
	fs.DurationVar(&b.Max, "max-delay", b.Max, "cap on the doubling gaps; in the slow tier, the least time between attempts a probe, a remote restart or a network change may cause [$MCP_RECONNECT_MAX_DELAY]")
	fs.DurationVar(&d.IdleInterval, "idle-interval", d.IdleInterval, "re-check period of each armed directory while nothing is due (jittered, rounded up to the next second) [$MCP_RECONNECT_IDLE_INTERVAL]")
	fs.Float64Var(&b.Jitter, "jitter", b.Jitter, "each delay is multiplied by a random factor in [1-j, 1+j] (a first check after arming or a wake only downwards) [$MCP_RECONNECT_JITTER]")
	fs.IntVar(&d.MaxConcurrent, "max-concurrent", d.MaxConcurrent, "connect calls in flight at once, across all directories and OpenCode servers; each server may hold all but one slot per other server, and its remote connects all its slots but one, so a silent remote URL never holds up a local server (with 1, a remote connect gets a slot of its own beside the local one; a server whose share is one slot runs one connect at a time) [$MCP_RECONNECT_MAX_CONCURRENT]")
	fs.IntVar(&b.FastAttempts, "fast-attempts", b.FastAttempts, "attempts in one fast episode; then the slow tier [$MCP_RECONNECT_FAST_ATTEMPTS]")
	fs.DurationVar(&b.SlowInterval, "slow-interval", b.SlowInterval, "in the slow tier, the gap between attempts, from the last fast one on (jittered, rounded up to the next second); 0 gives up until the server is seen healthy or reconnect is asked [$MCP_RECONNECT_SLOW_INTERVAL]")
	fs.DurationVar(&d.StableAfter, "stable-after", d.StableAfter, "a server's attempt counter resets only after it stayed connected this long after its last attempt's connect returned (crash loops back off) [$MCP_RECONNECT_STABLE_AFTER]")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error [$MCP_RECONNECT_LOG_LEVEL]")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json [$MCP_RECONNECT_LOG_FORMAT]")
	fs.BoolVar(&f.probe, "probe", true, "probe failed remote servers' endpoints (TCP, TLS; no MCP, no credentials) and connect them as soon as they answer [$MCP_RECONNECT_PROBE]")
	fs.BoolVar(&f.toast, "toast", true, "show a toast in an attached TUI when a server comes back or drops to the slow tier (at most one per server per minute) [$MCP_RECONNECT_TOAST]")
	fs.BoolVar(&f.netwatch, "netwatch", true, "retry every failed server at once when the network changes (interfaces, addresses, routes) [$MCP_RECONNECT_NETWATCH]")
	fs.StringVar(&f.logFile, "log-file", "", "append logs to this file (created 0600) instead of stderr [$MCP_RECONNECT_LOG_FILE]")
	fs.StringVar(&f.service, "service-file", "", "follow the OpenCode 2 background service this service.json describes (its URL and password, read anew when it moves, and whenever it appears); by default "+defaultServiceFile()+" (and other channels' service-<channel>.json beside it) when neither --url nor a password is given [$MCP_RECONNECT_SERVICE_FILE]")
	fs.StringVar(&f.config, "config", defaultConfigPath(), "config file (TOML; keys are flag names); refused when another user owns it or others may write it, and, when it holds a password or [[opencode]] tables, when others may read it [$MCP_RECONNECT_CONFIG]")
}

// registerOptIns adds the flags with which the user insists on what is
// refused by default: --allow-http-password (watch, doctor: both send the
// password) and, with watch, --allow-duplicate. run has neither: its
// OpenCode is its own child, on loopback. They are config-file keys like
// any flag.
func (f *watchFlags) registerOptIns(fs *pflag.FlagSet, watch bool) {
	fs.BoolVar(&f.allowHTTPPassword, "allow-http-password", false, "send the password to a plain-http OpenCode URL whose host is not loopback; without it such a URL with a password is refused, because basic auth over plain http is readable by anyone on the network path (use https or an SSH tunnel to 127.0.0.1 instead) [$MCP_RECONNECT_ALLOW_HTTP_PASSWORD]")
	if watch {
		fs.BoolVar(&f.allowDuplicate, "allow-duplicate", false, "run even when a running daemon of this user already watches the same OpenCode server (or follows the same OpenCode 2 service file); without it watch names that daemon and exits 78 (which the installed service is not restarted after). Two daemons are bad: both connect every crashed MCP server, so a stdio server is spawned twice, and each keeps its own backoff [$MCP_RECONNECT_ALLOW_DUPLICATE]")
	}
}

// load applies the environment, then the config file, to every flag not
// given on the command line: flags > env > file > defaults.
func (f *watchFlags) load(fs *pflag.FlagSet) error {
	typed := map[string]bool{"username": fs.Changed("username")}
	if fs.Changed("password") {
		f.passwordSource = "--password"
	}
	if fs.Changed("url") {
		f.urlSource = "--url"
	}
	if err := applyEnv(fs); err != nil {
		return err
	}
	if f.passwordSource == "" && fs.Changed("password") {
		f.passwordSource = "env " + envName("password")
	}
	if f.urlSource == "" && fs.Changed("url") {
		f.urlSource = "$" + envName("url")
	}
	f.usernameFromEnv = !typed["username"] && fs.Changed("username")
	if err := f.loadFile(fs, fs.Changed("config")); err != nil {
		return err
	}
	if f.urlSource == "" && fs.Changed("url") {
		f.urlSource = "the config file's url"
	}
	return nil
}

// loadFile applies the config file f.config (explicit: named by the user,
// so a missing one is an error) to every flag not set yet, then the
// password file.
func (f *watchFlags) loadFile(fs *pflag.FlagSet, explicit bool) error {
	file, err := loadConfigFile(f.config, explicit)
	if err != nil {
		return err
	}
	if err := file.apply(fs); err != nil {
		return err
	}
	f.file = file
	if f.passwordSource == "" && fs.Changed("password") {
		f.passwordSource = "config file " + f.config
	}
	return f.applyPasswordFile(fs)
}

// envNames maps flags to the environment variables that set them when the
// flag is not given. Flags win over the environment.
var envNames = map[string]string{
	"url":      "OPENCODE_URL",
	"username": "OPENCODE_SERVER_USERNAME",
	"password": "OPENCODE_SERVER_PASSWORD",
}

func envName(flag string) string {
	if n, ok := envNames[flag]; ok {
		return n
	}
	return "MCP_RECONNECT_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag that was not given on the command line from its
// environment variable, with an error that names the variable. A flag set
// this way counts as given, so the config file cannot override it. With
// names, only those flags: status and reconnect read
// $MCP_RECONNECT_STATUS_ADDR, never the daemon's own settings
// ($MCP_RECONNECT_DIRECTORY must not narrow a reconnect, nor
// $MCP_RECONNECT_ALL widen one, nor $OPENCODE_URL choose a daemon: only a
// --url typed for this command does).
func applyEnv(fs *pflag.FlagSet, only ...string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || len(only) > 0 && !slices.Contains(only, f.Name) {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok || v == "" {
			return
		}
		if f.Value.Type() == "stringArray" && f.Name != "url" { // a URL holds colons: $OPENCODE_URL is one
			for _, part := range strings.Split(v, ":") {
				if part != "" {
					if e := fs.Set(f.Name, part); e != nil {
						err = e
					}
				}
			}
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			shown := v
			if f.Name == "password" {
				shown = "(hidden)"
			}
			err = fmt.Errorf("$%s=%q: %w", envName(f.Name), shown, e)
		}
	})
	return err
}

// daemonConfig is what the flags say of the daemon (watch's and run's),
// its engine's tunables validated.
func (f *watchFlags) daemonConfig() (daemon.Config, error) {
	return daemon.Config{Directories: f.directories, StatusAddr: f.statusAddr, StatusPublic: f.statusPublic, Engine: f.engine,
		NoProbes: !f.probe, NoToasts: !f.toast, NoNetwatch: !f.netwatch, Version: versionString(), AllowDuplicate: f.allowDuplicate}, f.engine.Validate()
}

func newWatch() *cobra.Command {
	var f watchFlags
	var envFile string
	var opencodePID int
	cmd := &cobra.Command{
		Use:   "watch [flags]",
		Short: "Attach to a running OpenCode server and keep its MCP servers connected",
		Long: `watch attaches to a running OpenCode server (opencode serve, a TUI started
with --port, or OpenCode 2's background service) and reconnects its failed
MCP servers until stopped with SIGINT or SIGTERM (it logs which one, at
info). It speaks both OpenCode
generations (1.x and 2.x), detected at start and again whenever the server
comes back after it could not be reached.

With no --url and no password (by flag, environment or config file),
watch follows the OpenCode you run by default: the OpenCode 2 background
service registered in $XDG_STATE_HOME/opencode/ (service.json for the
latest channel, service-<channel>.json for the others), and while no
service runs, OpenCode 1.x at http://127.0.0.1:4096 if it answers there.
The file gives the URL, password and pid, checked against the running
service; the password is held in memory only. Of several services, watch
follows service.json's when it answers, else the one whose file was
written last, and says which in its log, in status and in doctor. watch
looks again whenever the server it follows cannot be reached, and every
5 s while no service answers (one read of the directory; a request only
to a service file that is new, rewritten, young or names a running pid),
also while 1.x at :4096 is watched, so a service that starts after watch,
or goes away and comes back, is followed within about 5 s. Servers listed
as [[opencode]] in the config file are watched beside the service
(without the 1.x fallback).

With --opencode-pid PID, watch serves that one OpenCode process, as the
OpenCode plugin starts it: the server is --url when given (the 1.x
plugin passes the URL OpenCode gave it) and PID listens on its port, else
the OpenCode 2 service whose service file names PID, else the port PID
listens on (read from /proc: Linux only). watch ends when PID ends (the
kernel tells it), logs to the file run logs to unless --log-file
is given, and takes a free status port when its address is taken. A
running daemon that watches the same server makes it wait up to 5 s for
that one to end (the previous OpenCode on the same port), then refuse
as below.

A running daemon of this user that already watches the same OpenCode server
(its URL compared normalised, or the same OpenCode 2 service file) makes
watch refuse to start: it names that daemon (pid, status address, URLs)
and exits 78, unless --allow-duplicate is given. The installed service
is not restarted after that status (systemd: RestartPreventExitStatus=;
Homebrew's service, whose launchd restarts after any non-zero status,
exits 0 instead, through $MCP_RECONNECT_DUPLICATE_EXIT): a restart would
be refused again. The same goes for an unsafe environment file of the
systemd unit (another user's, writable by others, or holding a password
others can read): watch says why and exits 78.

A password given once (--password, $OPENCODE_SERVER_PASSWORD, the config
file's password) goes to one --url only: with several, watch refuses and
asks for [[opencode]] tables with a password-file each; with [[opencode]]
tables and no --url it would go to no server, and watch refuses too,
except $OPENCODE_SERVER_PASSWORD, which people export for OpenCode itself:
watch says once that it is not used, and goes on. A password for a
plain-http URL whose host is not loopback (127.0.0.0/8, ::1, localhost) is
refused unless --allow-http-password is given.

Every flag can also be set from the environment variable shown in brackets;
a flag given on the command line wins. The Go runtime reads $GOMEMLIMIT, a
soft limit on the daemon's memory (BENCHMARKS.md has what it costs), and
$GOMAXPROCS: the daemon runs on one processor unless it is set; status
shows the daemon's own resident memory and goroutines.`,
		Example: `  mcp-reconnect watch      # the OpenCode 2 service whenever it runs, else 1.x at :4096
  OPENCODE_SERVER_PASSWORD=… mcp-reconnect watch --url http://127.0.0.1:4096
  mcp-reconnect watch --directory ~/src/project --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			forPID := cmd.Flags().Changed(opencodePIDFlag)
			if forPID && !cmd.Flags().Changed("log-file") {
				f.logFile = defaultLogPath() // started detached, as run's daemon: nobody reads its stderr
			}
			statusAddrTyped := cmd.Flags().Changed("status-addr")
			if err := f.load(cmd.Flags()); err != nil {
				return err
			}
			forPID = forPID || cmd.Flags().Changed(opencodePIDFlag)
			log, closeLog, err := f.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeLog()
			if envFile != "" {
				// systemd read this process's environment from it: refused
				// as a config file would be when others could change it.
				warning, err := service.CheckEnvFileAt(envFile)
				if err != nil {
					// Not restarted after service.ExitConfig: a restart would
					// read the same file and be refused again.
					return f.refuse(cmd.ErrOrStderr(), log, "not watching: the service's environment file is unsafe; exiting so that the service manager does not restart this one until it is fixed",
						service.ExitConfig, err, "file", envFile)
				}
				if warning != "" {
					log.Warn("the service's environment file is readable by other users", "file", envFile, "detail", warning)
				}
			}
			cfg, err := f.daemonConfig()
			if err != nil {
				return err
			}
			ctx, stop := stopOnSignal(cmd.Context(), log)
			defer stop()
			if forPID {
				// One daemon per OpenCode process: several OpenCodes, several
				// daemons, each on a free status port unless one was typed.
				cfg.StatusAddrFallback = !statusAddrTyped
				var oc daemon.OpenCodeProcess
				if oc, err = f.openCodeProcess(opencodePID, log); err != nil {
					return err
				}
				err = daemon.RunFor(ctx, cfg, oc, log)
				if err != nil && f.logsToFile() && !errors.As(err, new(*daemon.DuplicateError)) {
					log.Error("not watching", "pid", opencodePID, "err", err) // started detached: the log is where it is read
				}
			} else if cfg.Servers, err = f.servers(cmd.Flags(), log); err != nil {
				return err
			} else {
				err = daemon.Run(ctx, cfg, log)
			}
			if dup := (*daemon.DuplicateError)(nil); errors.As(err, &dup) {
				// The exit status service managers are told not to restart
				// after (service.ExitDuplicate, or
				// $MCP_RECONNECT_DUPLICATE_EXIT).
				return f.refuse(cmd.ErrOrStderr(), log, "not watching: another mcp-reconnect daemon already watches this OpenCode server; exiting so that a service manager does not restart this one",
					duplicateExit(os.Getenv(service.DuplicateExitEnv)), dup, "other_pid", dup.Running.PID)
			}
			return err
		},
	}
	f.register(cmd.Flags())
	f.registerOptIns(cmd.Flags(), true)
	cmd.Flags().IntVar(&opencodePID, opencodePIDFlag, 0, "watch the server of OpenCode process `PID`, and end when it ends (the OpenCode plugin starts watch so): its server is --url when given and PID listens on its port, else the OpenCode 2 service whose service file names PID, else the port PID listens on (Linux); logs go to "+defaultLogPath()+" unless --log-file says otherwise, and the status API moves to a free port when its address is taken [$MCP_RECONNECT_OPENCODE_PID]")
	cmd.Flags().StringVar(&envFile, service.EnvFileFlag, "", "the environment file the service manager started watch with (the installed systemd unit passes it): refused when another user owns it or others can change it, or when it holds a password others can read")
	_ = cmd.Flags().MarkHidden(service.EnvFileFlag)
	return cmd
}

// stopOnSignal is signal.NotifyContext for SIGINT and SIGTERM that
// logs, at info, the one line saying which signal ended the daemon: a
// service manager's stop must not look like a crash or a hang in the
// journal.
func stopOnSignal(parent context.Context, log *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-sigs:
			name := sig.String()
			if s, ok := sig.(syscall.Signal); ok {
				name = unix.SignalName(s)
			}
			log.Info("stopping: signal received", "signal", name)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
		<-done
	}
}

// refuse ends a watch that a service manager must not restart (a restart
// would be refused again, every few seconds, for ever): one log line
// saying why and how to fix it (the journal's, under systemd), with
// attrs, and exit status code, which the installed service is not
// restarted after.
func (f *watchFlags) refuse(stderr io.Writer, log *slog.Logger, msg string, code int, err error, attrs ...any) error {
	log.Error(msg, append(attrs, "exit_status", code, "err", err)...)
	if f.logsToFile() {
		// The log line went to a file: say it where it was asked too.
		fmt.Fprintln(stderr, "mcp-reconnect:", termsafe.Text(err.Error()))
	}
	return exitError{code}
}

// duplicateExit is the exit status of a refused duplicate: v when it is
// one (0–125), else service.ExitDuplicate.
func duplicateExit(v string) int {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 && n <= 125 {
		return n
	}
	return service.ExitDuplicate
}

func newStatus() *cobra.Command {
	var c daemonChoice
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show what the running daemons see, per directory and server",
		Long: `status shows what the running mcp-reconnect daemons see. It finds them in the
registry of running daemons ($XDG_STATE_HOME/mcp-reconnect/daemons): with
one daemon it shows it; with several (several wrapped TUIs) it shows each,
and --json prints {"daemons": [...]}. --url or --status-addr picks one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ds, err := c.find(cmd.Flags())
			if err != nil {
				return err
			}
			return showStatus(cmd.Context(), cmd.OutOrStdout(), ds, asJSON)
		},
	}
	c.register(cmd.Flags(), "only the daemon watching this OpenCode URL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func newReconnect() *cobra.Command {
	var c daemonChoice
	var dir string
	cmd := &cobra.Command{
		Use:   "reconnect [--directory D] [NAME...]",
		Short: "Retry failed MCP servers now, with a fresh backoff",
		Long: `reconnect asks the running daemon to start a fresh episode now for the named
MCP servers (all failed ones when none is named), in one directory (armed if
it was not) or in every armed directory. Servers that are not "failed" are
left alone.

The daemon is found in the registry of running daemons, which also holds the
token its status API wants for this. With several daemons running, say which
with --url or --status-addr, or pass --all.

Arming a directory makes OpenCode start the MCP servers its config names,
so --directory arms it only in a server you chose: with one daemon watching
one OpenCode server, there; with --url, in that server. --all --directory D
without --url retries D only where it is armed already, in every daemon and
server that has it, and arms it nowhere (an error says so when no daemon has
it armed). A daemon watching several servers refuses --directory without
--url.`,
		RunE: func(cmd *cobra.Command, names []string) error {
			if dir != "" {
				abs, err := daemon.PhysicalDir(dir)
				if err != nil {
					return err
				}
				dir = abs
			}
			ds, err := c.find(cmd.Flags())
			if err != nil {
				return err
			}
			if len(ds) > 1 && !c.all {
				ents := make([]registry.Entry, 0, len(ds))
				for _, d := range ds {
					ents = append(ents, d.entry)
				}
				return fmt.Errorf("%w; say which with --url or --status-addr, or pass --all:\n%s", errSeveral, describe(ents))
			}
			var calls []reconnectCall
			if c.all && dir != "" && c.url == "" {
				if calls, err = armedCalls(cmd.Context(), ds, dir, names); err != nil {
					return err
				}
			} else {
				for _, d := range ds {
					calls = append(calls, reconnectCall{d, statusapi.ReconnectRequest{Directory: dir, Servers: names, URL: c.url}})
				}
			}
			n := 0
			for _, call := range calls {
				res, err := call.daemon.client.Reconnect(cmd.Context(), call.req)
				if err != nil {
					return err
				}
				for _, r := range res.Results {
					for _, d := range r.Directories {
						fmt.Fprintf(cmd.OutOrStdout(), "reconnect scheduled: %s %s\n", termsafe.Line(r.URL), termsafe.Line(d))
						n++
					}
				}
			}
			if n == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no directory is armed; pass --directory to arm one")
			}
			return nil
		},
	}
	c.register(cmd.Flags(), "the daemon watching this OpenCode URL")
	cmd.Flags().BoolVar(&c.all, "all", false, "every running daemon; with --directory and no --url, only those where the directory is already armed (nothing new is armed)")
	cmd.Flags().StringVar(&dir, "directory", "", "only this project directory (armed if needed, except with --all and no --url: see above)")
	return cmd
}
