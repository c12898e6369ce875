package service

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
)

// UnitName is the systemd user unit.
const UnitName = "mcp-reconnect.service"

// RestartSec is how long systemd waits before starting the daemon again
// after it failed, in seconds: long enough not to spin on a persistent
// error, short enough that MCP servers are watched again before anyone
// notices.
const RestartSec = 5

// ExitConfig is the exit status of `watch` refused for its setup (78,
// EX_CONFIG in sysexits(3): the setup, not this process, must change):
// its service environment file is unsafe (CheckEnvFileAt), or it is a
// duplicate (ExitDuplicate). Restarting it cannot help: the file or the
// other daemon is still there 5 s later, and systemd would start, refuse
// and restart the daemon every RestartSec for ever. The unit lists it in
// RestartPreventExitStatus=, so a refused daemon stays stopped (failed,
// with its reason in the journal).
const ExitConfig = 78

// ExitDuplicate is the exit status of `watch` refused because a running
// daemon of this user already watches the same OpenCode server
// (ExitConfig); a service manager without RestartPreventExitStatus= (the
// launchd of the Homebrew formula's service) asks for exit 0 instead
// (DuplicateExitEnv).
const ExitDuplicate = ExitConfig

// DuplicateExitEnv names the variable that sets the exit status of a
// `watch` refused as a duplicate (default ExitDuplicate). The Homebrew
// formula's service sets it to 0: its KeepAlive {SuccessfulExit: false}
// restarts a job after any other status, and launchd has no per-status
// exception.
const DuplicateExitEnv = "MCP_RECONNECT_DUPLICATE_EXIT"

// WatchdogSec is the unit's watchdog: the daemon pings every half of it
// while its engines turn (internal/daemon), and systemd kills a daemon
// whose pings stopped, which Restart=on-failure then restarts.
const WatchdogSec = 30

// render is the unit install writes for spec. Every value is quoted for
// systemd: a path with a space, "%" (a specifier) or "$" (a variable in
// ExecStart) stays one literal argument.
func (m *Manager) render(spec Spec) ([]byte, error) {
	ef := m.EnvFile()
	if err := plainText(m.Path(), ef); err != nil {
		return nil, err
	}
	// The installing user's XDG_CONFIG_HOME and XDG_STATE_HOME, when set:
	// without them the service would read another config file and
	// register in another registry than the CLI reads. Never anything
	// secret.
	var env [][2]string
	for _, k := range []string{"XDG_CONFIG_HOME", "XDG_STATE_HOME"} {
		if v := m.env.xdg(k, ""); v != "" {
			if err := plainText(v); err != nil {
				return nil, fmt.Errorf("$%s: %w", k, err)
			}
			env = append(env, [2]string{k, v})
		}
	}
	header := fmt.Sprintf("# %s; `mcp-reconnect service uninstall` removes it.\n", Marker)
	return unitText(spec, header, ef, systemdEscapePath(ef), systemdQuote(ef, true), env)
}

// PackageUnitDir is where the .deb and .rpm put the systemd user unit, for
// every user: `systemctl --user enable --now mcp-reconnect` starts it.
const PackageUnitDir = "/usr/lib/systemd/user"

// PackageUnit is the unit the Linux packages ship in PackageUnitDir for
// binary (/usr/bin/mcp-reconnect there): the one install writes, minus
// what belongs to one user. It pins no XDG variable, and its environment
// file is %E/mcp-reconnect/env, which systemd resolves per user to
// $XDG_CONFIG_HOME/mcp-reconnect/env (~/.config by default): the file
// install's unit names in that user's home. It carries no Marker: install
// did not write it, and uninstall never removes it.
func PackageUnit(binary string) ([]byte, error) {
	spec := Spec{Binary: binary}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	header := "# The mcp-reconnect package's unit, for every user: systemctl --user enable --now mcp-reconnect\n" +
		"# `mcp-reconnect service install` writes one of the same name in ~/.config/systemd/user,\n" +
		"# which takes this one's place for that user (and `service uninstall` gives it back).\n"
	return unitText(spec, header, "~/.config/mcp-reconnect/env", "%E/mcp-reconnect/env", `"%E/mcp-reconnect/env"`, nil)
}

// unitText is the unit of both: what install writes for one user (header
// with the Marker, that user's environment file, the XDG variables pinned)
// and what the packages ship for all (PackageUnit). envFileShown names the
// environment file for people, envFile is its EnvironmentFile= value and
// envFileArg the same file as an ExecStart= argument: the daemon checks
// the file it was given as it checks its config file (CheckEnvFileAt).
func unitText(spec Spec, header, envFileShown, envFile, envFileArg string, env [][2]string) ([]byte, error) {
	if strings.ContainsAny(spec.Binary, `"'\`) {
		// systemd refuses such an executable ("contains special
		// characters") and would never start the unit.
		return nil, fmt.Errorf("service: systemd does not run an executable whose path holds a quote or backslash (%s); move the binary to a plain path", spec.Binary)
	}
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "# No secrets here: a password goes in the config file (chmod 600) or in\n# %s (OPENCODE_SERVER_PASSWORD=…, chmod 600).\n", envFileShown)
	b.WriteString("[Unit]\n")
	b.WriteString("Description=mcp-reconnect: keep the MCP servers of OpenCode connected\n")
	b.WriteString("\n[Service]\n")
	// notify: the daemon says READY=1 once it serves, and only its main
	// process may say anything (a child that inherited $NOTIFY_SOCKET
	// cannot speak for it).
	b.WriteString("Type=notify\n")
	b.WriteString("NotifyAccess=main\n")
	fmt.Fprintf(&b, "WatchdogSec=%d\n", WatchdogSec)
	args := make([]string, 0, 6)
	for i, a := range spec.Args() {
		// systemd expands $VAR in the arguments, not in the command
		// itself (where "$$" would stay two dollars).
		args = append(args, systemdQuote(a, i > 0))
	}
	args = append(args, systemdQuote("--"+EnvFileFlag, true), envFileArg)
	fmt.Fprintf(&b, "ExecStart=%s\n", strings.Join(args, " "))
	fmt.Fprintf(&b, "EnvironmentFile=-%s\n", envFile)
	for _, kv := range env {
		fmt.Fprintf(&b, "Environment=%s\n", systemdQuote(kv[0]+"="+kv[1], false))
	}
	// on-failure: a crash, a kill or a non-zero exit restarts it; a clean
	// exit (SIGTERM from `systemctl --user stop`) does not.
	b.WriteString("Restart=on-failure\n")
	fmt.Fprintf(&b, "RestartSec=%d\n", RestartSec)
	// Except a daemon refused because another one watches the same
	// OpenCode server: it would be refused again at every restart.
	fmt.Fprintf(&b, "RestartPreventExitStatus=%d\n", ExitConfig)
	// Logs go to stderr, which systemd sends to the journal.
	b.WriteString("\n[Install]\n")
	b.WriteString("WantedBy=default.target\n")
	return []byte(b.String()), nil
}

// systemdQuote quotes one word for a unit file: inside double quotes,
// backslash and quote are escaped, "%" is doubled (specifiers), and in
// ExecStart's arguments "$" is doubled (variable expansion).
func systemdQuote(v string, args bool) string {
	v = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(v)
	if args {
		v = strings.ReplaceAll(v, "$", "$$")
	}
	return `"` + v + `"`
}

// systemdEscapePath escapes a path for a directive that takes one
// unquoted path (EnvironmentFile): only specifiers are special.
func systemdEscapePath(p string) string { return strings.ReplaceAll(p, "%", "%%") }

// systemctl runs `systemctl --user args`, saying so on w, or with dryRun
// says it would. A unit file already gone (removed by hand) has nothing
// to disable.
func (m *Manager) systemctl(ctx context.Context, w io.Writer, dryRun bool, args ...string) error {
	argv := append([]string{"systemctl", "--user"}, args...)
	if dryRun {
		fmt.Fprintf(w, "would run: %s\n", shellquote.Join(argv))
		return nil
	}
	out, err := m.env.Run(ctx, argv)
	if err != nil && (args[0] != "disable" || !bytes.Contains(out, []byte("does not exist"))) {
		return fmt.Errorf("%s failed: %v%s", shellquote.Join(argv), err, indentOutput(out))
	}
	fmt.Fprintf(w, "ran %s\n", shellquote.Join(argv))
	return nil
}

// userManagerHint follows a systemctl that failed.
const userManagerHint = "\n(systemctl --user needs the user's systemd: a login session, or `loginctl enable-linger` for a user without one)"

func indentOutput(out []byte) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return ""
	}
	return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// parseSystemdShow reads `systemctl --user show`, which answers for a
// unit in any state (is-active only says active or not, and exits
// non-zero for the rest).
func parseSystemdShow(out []byte) Running {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	run := Running{Restarts: -1, Enabled: kv["UnitFileState"]}
	if kv["LoadState"] == "not-found" {
		run.State = "not loaded"
		return run
	}
	run.State = kv["ActiveState"]
	if sub := kv["SubState"]; sub != "" {
		run.State += " (" + sub + ")"
	}
	run.PID, _ = strconv.Atoi(kv["MainPID"])
	if n, err := strconv.Atoi(kv["NRestarts"]); err == nil {
		run.Restarts = n
	}
	run.Active = kv["ActiveState"] == "active" && run.PID > 0
	return run
}
