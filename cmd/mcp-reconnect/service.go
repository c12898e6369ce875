package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

func newService() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service install|uninstall|status",
		Short: "Keep `mcp-reconnect watch` running as a per-user service (systemd, Linux only)",
		Long: `service installs ` + "`mcp-reconnect watch`" + ` as a per-user service that starts at
login and is restarted ` + fmt.Sprint(service.RestartSec) + ` s after it fails: a systemd user unit,
~/.config/systemd/user/` + service.UnitName + `, enabled and started with
systemctl --user; logs in the journal (journalctl --user -u ` + service.UnitName + `).
Linux only: elsewhere (macOS) run ` + "`mcp-reconnect watch`" + ` from a service or
login item of your own.

The service runs this binary's ` + "`watch`" + ` with your config file: with no URL and
no password configured it follows the OpenCode 2 background service, else
it watches the OpenCode your config file names. No password is ever written
into the unit: put it in the config file (chmod 600) or in
~/.config/mcp-reconnect/env (OPENCODE_SERVER_PASSWORD=…, chmod 600).

uninstall removes exactly what install wrote (recorded in
$XDG_STATE_HOME/mcp-reconnect/service-install.json), after stopping it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newServiceInstall(), newServiceUninstall(), newServiceStatus())
	return cmd
}

// serviceManager is this system's service.Manager (an error off Linux).
func serviceManager() (*service.Manager, error) {
	return service.New(service.Env{GOOS: runtime.GOOS, SystemUnitDirs: systemUnitDirs})
}

// systemUnitDirs are where systemd finds user units for every user (the
// package's); tests point them at a directory of their own.
var systemUnitDirs = service.DefaultSystemUnitDirs

// executable is os.Executable; tests point it at a stand-in.
var executable = os.Executable

// serviceBinary is the running binary, through symlinks, refused when it
// is a temporary build that will be gone after this command.
func serviceBinary() (string, error) {
	exe, err := executable()
	if err != nil {
		return "", fmt.Errorf("service: finding this binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "", fmt.Errorf("service: %s is a temporary build (go run) that is deleted when it exits; install the binary first (go install github.com/mcp-reconnect/mcp-reconnect/cmd/mcp-reconnect@latest) and run its `service install`", exe)
	}
	return exe, nil
}

func newServiceInstall() *cobra.Command {
	var config, password string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "install [--config FILE] [--dry-run]",
		Short: "Install and start the per-user service that runs `mcp-reconnect watch`",
		Long: `install writes the per-user service (a systemd user unit; Linux only) that
runs ` + "`mcp-reconnect watch`" + ` with this binary, starts it now and at every login,
and restarts it ` + fmt.Sprint(service.RestartSec) + ` s after it fails. Running it again updates the
service (after the binary moved, or with another --config).

The config file (--config, else $MCP_RECONNECT_CONFIG, else watch's default)
is checked first as watch would read it. The service does not see this
shell's environment: settings go in the config file. A password goes in the
config file (chmod 600) or in ~/.config/mcp-reconnect/env (chmod 600) —
never in the unit, so there is no --password.

--dry-run prints the directories and files (with paths and modes) it would
write and the commands it would run, and changes nothing.`,
		Example: `  mcp-reconnect service install --dry-run
  mcp-reconnect service install
  mcp-reconnect service install --config ~/.config/mcp-reconnect/work.toml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := serviceManager()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("password") {
				return fmt.Errorf("service install takes no --password: a password in the unit is readable by every process of yours and ends up in backups; put it in the config file (key password, chmod 600) or %s as OPENCODE_SERVER_PASSWORD=… (chmod 600)", m.EnvFile())
			}
			out := cmd.OutOrStdout()
			bin, err := serviceBinary()
			if err != nil {
				return err
			}
			explicit := cmd.Flags().Changed("config")
			if v := os.Getenv(envName("config")); !explicit && v != "" {
				config, explicit = v, true
			}
			spec := service.Spec{Binary: bin}
			if explicit {
				config, _ = expandHome(config) // without a home: as given
				if config, err = filepath.Abs(config); err != nil {
					return err
				}
				spec.Config = config
			}
			if err := checkServiceConfig(spec.Config); err != nil {
				return fmt.Errorf("the service would fail to start: %w", err)
			}
			if warning, err := service.CheckEnvFileAt(m.EnvFile()); err != nil {
				return fmt.Errorf("service: %w", err)
			} else if warning != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", warning)
			}
			if names := shellOnlySettings(); names != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s set in this shell; the service does not see this shell's environment: put such settings in the config file or %s\n", names, m.EnvFile())
			}
			if su := m.SystemUnit(); su != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: the mcp-reconnect package installed %s for every user; the unit install writes takes its place for you (service uninstall gives it back), so one daemon runs either way\n", su)
			}
			if err := m.Install(cmd.Context(), spec, versionString(), time.Now(), out, dryRun); err != nil {
				return err
			}
			if dryRun {
				fmt.Fprintln(out, "dry run: nothing was changed")
				return nil
			}
			fmt.Fprintf(out, "installed and started: %s\n", m.Describe())
			fmt.Fprintf(out, "logs: %s\n", service.Logs)
			fmt.Fprintf(out, "secrets: a password goes in the config file (key password, chmod 600) or in %s as OPENCODE_SERVER_PASSWORD=… (chmod 600); the OpenCode 2 service needs none (watch reads its service.json)\n", m.EnvFile())
			if h := lingerHint(); h != "" {
				fmt.Fprintln(out, h)
			}
			fmt.Fprintln(out, "check it with: mcp-reconnect service status")
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", defaultConfigPath(), "config file the service's watch reads (passed as --config when given) [$MCP_RECONNECT_CONFIG]")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be written and run, change nothing")
	cmd.Flags().StringVar(&password, "password", "", "refused: a password never goes into the service file")
	_ = cmd.Flags().MarkHidden("password")
	return cmd
}

// expandHome is p with a leading ~/ made the home directory; p itself
// when the home is unknown (with the error).
func expandHome(p string) (string, error) {
	rest, ok := strings.CutPrefix(p, "~/")
	if !ok {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p, err
	}
	return filepath.Join(home, rest), nil
}

// checkServiceConfig reads the config file as watch will (unknown keys,
// its [[opencode]] tables and their password files, a password in a file
// others can read or for no server, a server listed twice), so install
// does not start a service that can only fail.
func checkServiceConfig(path string) error {
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs) // f.config: the default
	if path != "" {
		f.config = path
	}
	if err := f.loadFile(fs, path != ""); err != nil {
		return err
	}
	_, err := f.servers(fs, slog.New(slog.DiscardHandler))
	return err
}

// shellOnlySettings names settings made in this shell's environment that
// the service will not see (names only, never values), "" when none.
func shellOnlySettings() string {
	var names []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if v != "" && k != envName("config") && (strings.HasPrefix(k, "MCP_RECONNECT_") || k == "OPENCODE_URL" || k == "OPENCODE_SERVER_USERNAME" || k == "OPENCODE_SERVER_PASSWORD") {
			names = append(names, "$"+k)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// lingerHint tells a user whose systemd stops their services at logout
// how to keep it running (a shared dev box reached over ssh).
func lingerHint() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join("/var/lib/systemd/linger", u.Username)); err == nil {
		return ""
	}
	return "it runs while you have a login session; to keep it running after you log out: loginctl enable-linger " + u.Username
}

func newServiceUninstall() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "uninstall [--dry-run]",
		Short: "Stop the per-user service and remove exactly what `service install` wrote",
		Long: `uninstall stops the service and keeps it from starting at login, then
removes the files ` + "`service install`" + ` wrote (the unit and the manifest
that records them) and the directories it created when they are empty
again. Nothing else: your config file, the environment file and logs stay.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := serviceManager()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			installed, err := m.Uninstall(cmd.Context(), out, dryRun)
			if err != nil {
				return err
			}
			if !installed {
				fmt.Fprintf(out, "not installed (no %s)\n", m.Describe())
				return nil
			}
			if dryRun {
				fmt.Fprintln(out, "dry run: nothing was changed")
				return nil
			}
			fmt.Fprintf(out, "uninstalled: %s\n", m.Describe())
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be stopped and removed, change nothing")
	return cmd
}

// serviceStatus is `service status --json`.
type serviceStatus struct {
	Service service.Report `json:"service"`
	// Daemon is the registry's entry for the service's process (never
	// its token) with what it sees.
	Daemon *daemonView `json:"daemon,omitempty"`
	// DaemonError says why there is no Daemon while the service runs.
	DaemonError string `json:"daemon_error,omitempty"`
	// Others are other registered daemons (started by hand or by run).
	Others []daemonView `json:"others,omitempty"`
}

func newServiceStatus() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Say whether the service is installed and running, and what its daemon sees",
		Long: `status says whether the per-user service is installed (and whether the file
is what ` + "`service install`" + ` would write now), whether the service manager runs
it, and what the running daemon sees: its entry in the registry of running
daemons and, through its status API, the OpenCode servers it watches.

It also names a unit the mcp-reconnect package (.deb, .rpm) installed for
every user in ` + service.PackageUnitDir + `: it is the service when
you have no unit of your own (systemctl --user enable --now mcp-reconnect
starts it); the one ` + "`service install`" + ` writes takes its place for you.

It exits 0 when the service (yours or the package's) is installed and
running, 3 when not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := serviceManager()
			if err != nil {
				return err
			}
			bin, _ := serviceBinary() // "" on an error: status still reports; "current" is then false
			rep, err := m.Status(cmd.Context(), bin)
			if err != nil {
				return err
			}
			st := serviceStatus{Service: rep}
			lookupDaemon(cmd.Context(), &st)
			if asJSON {
				if err := writeIndentedJSON(cmd.OutOrStdout(), st); err != nil {
					return err
				}
			} else {
				writeServiceStatus(cmd.OutOrStdout(), m, st)
			}
			installed := rep.Installed || rep.SystemUnit != ""
			if !installed || rep.Running == nil || !rep.Running.Active {
				return exitError{3}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

// lookupDaemon finds the service's process in the registry and asks its
// status API what it sees.
func lookupDaemon(ctx context.Context, st *serviceStatus) {
	reg, err := registry.Default()
	if err != nil {
		st.DaemonError = err.Error()
		return
	}
	ents, err := reg.List()
	if err != nil {
		st.DaemonError = err.Error()
		return
	}
	pid := 0
	if r := st.Service.Running; r != nil && r.Active {
		pid = r.PID
	}
	for _, e := range ents {
		v := viewOf(e)
		if pid != 0 && e.PID == pid {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			s, err := (&statusapi.Client{Addr: e.StatusAddr}).Status(ctx)
			cancel()
			if err != nil {
				v.Error = err.Error()
			} else {
				v.Status = &s
			}
			st.Daemon = &v
			continue
		}
		st.Others = append(st.Others, v)
	}
	if pid != 0 && st.Daemon == nil {
		st.DaemonError = fmt.Sprintf("the service's process (pid %d) is not in the registry of running daemons (%s); it registers once its status API listens: see its logs", pid, reg.Dir)
	}
}

func viewOf(e registry.Entry) daemonView {
	v := daemonView{PID: e.PID, URLs: e.URLs, StatusAddr: e.StatusAddr, Version: e.Version}
	if !e.Started.IsZero() {
		v.Started = &e.Started
	}
	return v
}

func writeServiceStatus(w io.Writer, m *service.Manager, st serviceStatus) {
	r := st.Service
	fmt.Fprintf(w, "service:   %s\n", m.Describe())
	switch {
	case !r.Installed && r.SystemUnit != "":
		fmt.Fprintf(w, "installed: for every user, by the mcp-reconnect package: %s (systemctl --user enable --now mcp-reconnect)\n", r.SystemUnit)
	case !r.Installed:
		fmt.Fprintln(w, "installed: no (mcp-reconnect service install)")
	case r.Current:
		fmt.Fprintln(w, "installed: yes, as `service install` would write it now")
	default:
		fmt.Fprintf(w, "installed: yes, but not as `service install` would write it now: %s (run mcp-reconnect service install to update it)\n", termsafe.Line(r.Differs))
	}
	if r.Installed && r.SystemUnit != "" {
		fmt.Fprintf(w, "           it takes the place of the package's %s for you\n", r.SystemUnit)
	}
	switch {
	case r.RunningError != "":
		fmt.Fprintf(w, "running:   unknown: %s\n", termsafe.Line(oneLineErr(r.RunningError)))
	case r.Running != nil:
		line := r.Running.State
		if r.Running.PID > 0 {
			line += fmt.Sprintf(", pid %d", r.Running.PID)
		}
		if r.Running.Restarts > 0 {
			line += fmt.Sprintf(", restarted %d times", r.Running.Restarts)
		}
		if r.Running.Enabled != "" {
			line += ", at login: " + r.Running.Enabled
		}
		fmt.Fprintf(w, "running:   %s\n", termsafe.Line(line)) // the service manager's words
	}
	fmt.Fprintf(w, "logs:      %s\n", r.Logs)
	fmt.Fprintf(w, "env file:  %s (%s)\n", r.EnvFile, r.EnvFileState)
	if d := st.Daemon; d != nil {
		fmt.Fprintf(w, "daemon:    pid %d, status api %s, version %s", d.PID, termsafe.Line(d.StatusAddr), termsafe.Line(d.Version))
		if d.Started != nil {
			fmt.Fprintf(w, ", since %s", d.Started.Local().Format(time.DateTime))
		}
		fmt.Fprintln(w)
		if d.Status == nil {
			fmt.Fprintf(w, "  not answering: %s\n", termsafe.Line(d.Error))
		} else {
			for _, line := range summarize(*d.Status) {
				fmt.Fprintf(w, "  %s\n", termsafe.Line(line))
			}
		}
	} else if st.DaemonError != "" {
		fmt.Fprintf(w, "daemon:    %s\n", termsafe.Line(st.DaemonError))
	}
	for _, o := range st.Others {
		fmt.Fprintf(w, "other daemon (not this service): pid %d watching %s, status api %s\n", o.PID, termsafe.Line(strings.Join(o.URLs, ",")), termsafe.Line(o.StatusAddr))
	}
}

func oneLineErr(s string) string { return strings.Join(strings.Fields(s), " ") }

// summarize is one line per watched OpenCode: its stream and its MCP
// servers counted by status.
func summarize(st statusapi.Status) []string {
	var out []string
	for _, s := range st.Servers {
		stream := "event stream connected"
		if !s.Stream.Connected {
			stream = "event stream down"
			if s.Stream.LastError != "" {
				stream += " (" + oneLineErr(s.Stream.LastError) + ")"
			}
		}
		counts := map[string]int{}
		for _, d := range s.Directories {
			for _, srv := range d.Servers {
				counts[srv.Status]++
			}
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
		servers := "no MCP servers seen yet"
		if len(parts) > 0 {
			servers = "MCP servers: " + strings.Join(parts, ", ")
		}
		out = append(out, fmt.Sprintf("%s: %s, %d directories armed, %s", s.URL, stream, len(s.Directories), servers))
	}
	if len(out) == 0 {
		out = append(out, "watching no OpenCode yet")
	}
	return out
}
