package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/doctor"
	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
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
route, MCP status and event the daemon relies on.

Which OpenCode: the one --url (or $OPENCODE_URL, or the config file's url)
names, or the service --service-file names; else the OpenCode of each
running mcp-reconnect daemon of this user (the registry of running
daemons), each checked in turn; else the OpenCode 2 background service
watch would follow (with no password given: service.json's when it
answers, else the newest service-<channel>.json whose service answers,
naming the other services that answer); else OpenCode 1.x's default,
http://127.0.0.1:4096. Its first line says which it chose and why. A
daemon's OpenCode is checked with the password the daemon has too: its
service file's, or its [[opencode]] table's password-file, else the one
given to doctor, to a server on this machine only. A service file's
password never goes to a port another user's process holds (the file is
stale, its service gone): that service is not checked, and doctor says
why, as the daemon refuses to follow it.

It then lists the MCP servers that need attention: those the daemon
watching that OpenCode sees in armed directories, and those of each
--directory (reading a directory's status starts its MCP servers, so only
the ones you name are read).

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
			if len(f.urls) > 1 {
				return fmt.Errorf("doctor checks one OpenCode server at a time: %d URLs given (%s: %s); pass --url to choose one", len(f.urls), f.urlSource, strings.Join(f.urls, ", "))
			}
			for _, u := range f.urls {
				if _, err := opencode.New(u, opencode.Options{}); err != nil {
					return err // a bad URL, said before any request
				}
			}
			dirs, err := daemon.PhysicalDirs(f.directories)
			if err != nil {
				return err
			}
			o := doctor.Options{Directories: dirs, ProcessTable: procview.System, UID: os.Getuid()}
			if rec, err := procview.DefaultRecord(); err == nil {
				o.Record = &rec
			}
			var ents []registry.Entry
			if reg, err := registry.Default(); err == nil {
				ents, _ = reg.List()
			}
			if reap {
				return reapOrphans(cmd, o, yes)
			}
			targets, err := f.doctorTargets(cmd.Context(), cmd.Flags(), ents)
			if err != nil {
				return err
			}
			var checks []doctor.Check
			for _, t := range targets {
				checks = append(checks, t.lines...)
				if t.url == "" {
					continue // not checked: its lines say why
				}
				if t.password != "" && !t.fromService && !f.allowHTTPPassword {
					if err := checkPlainHTTP(t.url); err != nil {
						return err // before the password is sent anywhere
					}
				}
				to := o
				to.PasswordSource, to.Daemon = t.passwordSource, t.daemon
				checks = append(checks, doctor.Run(cmd.Context(), t.url, opencode.Options{Username: t.username, Password: t.password}, to)...)
			}
			_, procs := doctor.FindProcesses(cmd.Context(), o) // whether OpenCode answered or not
			checks = append(checks, procs...)
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
	f.registerDoctor(cmd.Flags())
	f.registerOptIns(cmd.Flags(), false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	cmd.Flags().BoolVar(&reapFlag, "reap", false, "end the orphaned MCP processes of this user, asking before each one (the OpenCode checks are skipped)")
	cmd.Flags().BoolVar(&yesFlag, "yes", false, "with --reap: end every proven orphan without asking (needed without a terminal)")
	return cmd
}

// registerDoctor adds the flags doctor reads, in its own words: which
// OpenCode to check and with which credentials, the directories to read,
// the daemon to ask, the config file. The config file's keys for watch
// and run only are skipped (sharedKeys).
func (f *watchFlags) registerDoctor(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.urls, "url", nil, "the OpenCode server to check; by default the one each running daemon watches, else the OpenCode 2 service, else http://127.0.0.1:4096 (the first line says which, and why) [$OPENCODE_URL]")
	fs.StringVar(&f.username, "username", "opencode", "HTTP basic auth user (OpenCode 1.x) [$OPENCODE_SERVER_USERNAME]")
	fs.StringVar(&f.password, "password", "", "HTTP basic auth password to check with (the report says where it came from, never the password); prefer the environment or --password-file, a flag shows in ps [$OPENCODE_SERVER_PASSWORD]")
	fs.String(passwordFileFlag, "", "read the password to check with from this file (only you may read it: chmod 600) [$MCP_RECONNECT_PASSWORD_FILE]")
	fs.StringArrayVar(&f.directories, "directory", nil, "also read this project directory's MCP status and list its servers that need attention (repeatable); reading it starts its MCP servers in OpenCode [$MCP_RECONNECT_DIRECTORY, colon-separated]")
	fs.StringVar(&f.statusAddr, "status-addr", "", "the status API of the daemon to ask which directories are armed, and whose OpenCode to check; by default the registry of running daemons says [$MCP_RECONNECT_STATUS_ADDR]")
	fs.StringVar(&f.service, "service-file", "", "check the OpenCode 2 background service this service.json describes (its URL and password) [$MCP_RECONNECT_SERVICE_FILE]")
	fs.StringVar(&f.config, "config", defaultConfigPath(), "config file (TOML; keys are flag names): its url, password and [[opencode]] tables' password files are used; refused when another user owns it or others may write it [$MCP_RECONNECT_CONFIG]")
}

// doctorTarget is one OpenCode server doctor checks: where, with which
// credentials, and the lines that say why it was chosen.
type doctorTarget struct {
	// url is "" for a server not checked (lines say why).
	url, username, password string
	// passwordSource says where the password came from (never the
	// password), for the report.
	passwordSource string
	// fromService: the password is the service file's, for the URL that
	// file names.
	fromService bool
	// daemon is the running daemon that watches it: asked which
	// directories are armed (nil: none).
	daemon *statusapi.Client
	lines  []doctor.Check
}

// targetLine is the report's line saying which OpenCode is checked and why.
func targetLine(u, why string) doctor.Check {
	return doctor.Check{Severity: doctor.Info, Name: "target", Detail: opencode.Redact(u) + ": " + why}
}

// doctorTargets chooses what doctor checks: the URL the user gave (--url,
// $OPENCODE_URL, the config file's url) or the service --service-file
// names; else the OpenCode of each running daemon (ents; the one
// --status-addr names, when it is registered), with the password that
// daemon has; else the OpenCode 2 service watch would follow; else
// OpenCode 1.x's default address.
func (f *watchFlags) doctorTargets(ctx context.Context, flags *pflag.FlagSet, ents []registry.Entry) ([]doctorTarget, error) {
	var asked *statusapi.Client
	if f.statusAddr != "" {
		asked = &statusapi.Client{Addr: f.statusAddr}
		ents = slices.DeleteFunc(slices.Clone(ents), func(e registry.Entry) bool {
			if e.ListensAt(f.statusAddr) {
				asked.Token = e.Token
				return false
			}
			return true
		})
	}
	// watcher is the daemon to ask about u: --status-addr's, else the
	// registered one that watches it.
	watcher := func(u string) *statusapi.Client {
		if asked != nil {
			return asked
		}
		for _, e := range ents {
			if e.Watches(u) {
				return &statusapi.Client{Addr: e.StatusAddr, Token: e.Token}
			}
		}
		return nil
	}
	given := func(u, why string) doctorTarget {
		return doctorTarget{url: u, username: f.username, password: f.password, passwordSource: f.passwordSource,
			daemon: watcher(u), lines: []doctor.Check{targetLine(u, why)}}
	}
	serviceTarget := func(svc opencode.Service, check doctor.Check, why string) []doctorTarget {
		return []doctorTarget{{url: svc.URL, password: svc.Password(), passwordSource: "service file " + svc.Path, fromService: true,
			daemon: watcher(svc.URL), lines: []doctor.Check{targetLine(svc.URL, why), check}}}
	}
	switch {
	case f.urlSource != "":
		return []doctorTarget{given(f.urls[0], "given by "+f.urlSource)}, nil
	case f.service != "":
		svc, check, err := f.doctorService(ctx, f.service, false)
		if err != nil {
			return nil, err
		}
		return serviceTarget(svc, check, "the OpenCode 2 service --service-file names"), nil
	case len(ents) > 0:
		return f.daemonTargets(ents)
	}
	var stale []doctor.Check
	why := "OpenCode 1.x's default address (no --url or $OPENCODE_URL given, no mcp-reconnect daemon running, "
	if file := f.followService(flags); file == "" {
		why += "and with a password given the OpenCode 2 service file is not read)"
	} else {
		svc, check, err := f.doctorService(ctx, file, true)
		if err != nil {
			return nil, err
		}
		if svc.Path != "" {
			return serviceTarget(svc, check, "the OpenCode 2 background service (no --url or $OPENCODE_URL given, no mcp-reconnect daemon running)"), nil
		}
		if check.Name != "" {
			stale = append(stale, check)
		}
		why += "no OpenCode 2 service running)"
	}
	t := given(defaultURL, why)
	t.lines = append(t.lines, stale...)
	return []doctorTarget{t}, nil
}

// daemonTargets are the OpenCode servers the running daemons ents watch,
// each once, with the password each daemon has for it: the service
// file's, for the URL of the OpenCode 2 service a daemon follows (while
// its pid runs, and no other user's process holds its port: then that
// service is not checked); the password-file of the config file's [[opencode]]
// table for its URL; else the one given to doctor.
func (f *watchFlags) daemonTargets(ents []registry.Entry) ([]doctorTarget, error) {
	tables, err := f.file.servers()
	if err != nil {
		return nil, err
	}
	var out []doctorTarget
	seen := map[string]bool{}
	for _, e := range ents {
		for _, u := range e.URLs {
			n := registry.NormalizeURL(u)
			if u == "" || seen[n] {
				continue
			}
			seen[n] = true
			t := doctorTarget{url: u, username: f.username, password: f.password, passwordSource: f.passwordSource,
				daemon: &statusapi.Client{Addr: e.StatusAddr, Token: e.Token}}
			why := fmt.Sprintf("watched by the running mcp-reconnect daemon pid %d (no --url or $OPENCODE_URL given)", e.PID)
			if svc, ok := liveServiceAt(e.Service, u); ok {
				why = fmt.Sprintf("the OpenCode 2 service the running mcp-reconnect daemon pid %d follows (no --url or $OPENCODE_URL given)", e.PID)
				if err := daemon.ListenerOfOtherUser(svc.URL); err != nil {
					// The file is stale (its pid runs again) and its port
					// another user's: the password, which the next service
					// reuses, is not handed to them, nor anything checked.
					out = append(out, doctorTarget{lines: []doctor.Check{targetLine(u, why),
						{Severity: doctor.Warn, Name: "service", Detail: svc.Path + ": " + err.Error() + ": not checked"}}})
					continue
				}
				t.username, t.password, t.passwordSource, t.fromService = "", svc.Password(), "service file "+svc.Path, true
			} else if i := slices.IndexFunc(tables, func(s serverEntry) bool { return registry.NormalizeURL(s.URL) == n }); i >= 0 {
				t.username, t.password, t.passwordSource = cmp.Or(tables[i].Username, f.username), "", ""
				if pf := tables[i].PasswordFile; pf != "" {
					if t.password, err = readPasswordFile(pf); err != nil {
						return nil, err
					}
					t.passwordSource = "password file " + pf + " (its [[opencode]] table in " + f.config + ")"
				}
			} else if t.password != "" && !loopbackURL(u) {
				// The password given to doctor names no server: another
				// host, one the daemon reaches with a password of its own,
				// must not learn it.
				t.password, t.passwordSource = "", ""
				why += "; the password given to doctor is not sent to another host: pass --url to check it with one"
			}
			t.lines = []doctor.Check{targetLine(u, why)}
			out = append(out, t)
		}
	}
	return out, nil
}

// loopbackURL reports whether rawURL's host is this machine's loopback.
func loopbackURL(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && loopback.Host(u.Host)
}

// liveServiceAt is the OpenCode 2 service registered at u in the
// service file a daemon follows (file, and for the default one the other
// channels' beside it) whose pid still runs: a file left by a service
// that is gone names a port anyone may hold now, and its password must
// not go there.
func liveServiceAt(file, u string) (opencode.Service, bool) {
	if file == "" {
		return opencode.Service{}, false
	}
	regs, _ := opencode.Registrations(file, file == defaultServiceFile())
	for _, r := range regs {
		svc, err := opencode.ReadServiceFile(r.Path)
		if err == nil && registry.NormalizeURL(svc.URL) == registry.NormalizeURL(u) && registry.Running(svc.PID) {
			return svc, true
		}
	}
	return opencode.Service{}, false
}

// doctorService is the OpenCode 2 service doctor checks, as watch would
// follow it from file: with channels (the default service.json), the
// one whose service answers (service.json first, then the newest:
// daemon.ChooseService), else the first of them whose pid runs, to say
// why it does not answer. None (Path "") leaves the URL, with a warning
// when the only files are stale. The check says which file, and the
// other services that answer.
func (f *watchFlags) doctorService(ctx context.Context, file string, channels bool) (opencode.Service, doctor.Check, error) {
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
	case errors.Is(err, fs.ErrNotExist) && channels:
		return opencode.Service{}, doctor.Check{}, nil // no service registered: the 1.x default
	}
	regs, _ := opencode.Registrations(file, channels)
	var stale []string
	for _, r := range regs {
		s, rerr := opencode.ReadServiceFile(r.Path)
		switch {
		case rerr != nil:
		case registry.Running(s.PID):
			if err := daemon.ListenerOfOtherUser(s.URL); err != nil {
				stale = append(stale, r.Path+": "+err.Error()) // stale: its pid runs again
				break
			}
			return s, doctor.Check{Severity: doctor.Warn, Name: "service", Detail: "no registered OpenCode 2 service answers (" + err.Error() + "); checking " + r.Path}, nil
		default:
			stale = append(stale, fmt.Sprintf("%s registers pid %d, which is gone", r.Path, s.PID))
		}
	}
	if len(stale) > 0 && channels {
		// Left by services that are gone: watch would watch the 1.x
		// default meanwhile, and so does doctor.
		return opencode.Service{}, doctor.Check{Severity: doctor.Warn, Name: "service", Detail: "no OpenCode 2 service runs: " + strings.Join(stale, "; ")}, nil
	}
	if len(stale) > 0 {
		return opencode.Service{}, doctor.Check{}, fmt.Errorf("the OpenCode 2 service is not running: %s (pass --url to check another server)", strings.Join(stale, "; "))
	}
	// No file (Registrations names none), or none that could be read.
	return opencode.Service{}, doctor.Check{}, fmt.Errorf("the OpenCode 2 service file: %w (pass --url to check another server)", err)
}

// reapOrphans is doctor --reap: list the processes, then end the proven
// orphans, asking on the terminal unless --yes.
func reapOrphans(cmd *cobra.Command, o doctor.Options, yes bool) error {
	ro := doctor.ReapOptions{Yes: yes, Prompt: cmd.ErrOrStderr(), Report: cmd.OutOrStdout()}
	if in, ok := cmd.InOrStdin().(*os.File); ok && term.IsTerminal(int(in.Fd())) {
		ro.In = in
	}
	return doctor.Reap(cmd.Context(), o, ro)
}
