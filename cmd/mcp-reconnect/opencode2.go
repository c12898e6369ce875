package main

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/launch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// defaultServiceFile is where OpenCode 2's background service records its
// URL and password: $XDG_STATE_HOME/opencode/service.json, on macOS too.
func defaultServiceFile() string {
	home, _ := os.UserHomeDir()
	return opencode.ServiceFilePath(os.Getenv, home)
}

// followService is the OpenCode 2 service file watch follows: the one
// --service-file names, or, when neither a URL nor a password was given
// (by flag, environment or config file), the default one, whether it
// exists yet or not: the service writes it when it starts, usually after
// a daemon started at login.
func (f *watchFlags) followService(fs *pflag.FlagSet) string {
	if f.service != "" {
		return f.service
	}
	if fs.Changed("url") || fs.Changed("password") {
		return ""
	}
	return defaultServiceFile()
}

// serviceServer is the service registered in file, as one server to
// watch (daemon.ServiceServer). The default file brings the other
// channels' service-<channel>.json beside it. alone says nothing else is
// configured (no --url, no [[opencode]] table): then, unless
// --service-file was given, OpenCode 1.x at its default address is
// watched while no service runs.
func (f *watchFlags) serviceServer(file string, alone bool) daemon.Target {
	var fallback *daemon.Target
	if alone && f.service == "" {
		fallback = &daemon.Target{URL: defaultURL, Username: f.username}
	}
	return daemon.ServiceServer(file, file == defaultServiceFile(), fallback)
}

// spawnServiceWatch starts `self watch` for the OpenCode 2 service in
// the background (launch.StartDetached: a session of its own, so it
// outlives the terminal, and not this process's child, so the TUI this
// process becomes never holds it as a zombie), logging to logFile, with
// flags (serviceDaemonArgs). Its environment names no OpenCode URL,
// user or password: the service file says them, and a password meant for
// another server must not reach it.
func spawnServiceWatch(self, file, logFile, config string, flags []string) func() error {
	return func() error {
		args := []string{"watch", "--service-file", file, "--status-addr", "127.0.0.1:0", "--log-file", logFile}
		if config != "" {
			args = append(args, "--config", config)
		}
		args = append(args, flags...)
		_, err := launch.StartDetached(self, args, serviceWatchEnv(os.Environ()))
		return err
	}
}

// serviceDaemonFlags are run's flags that say how the daemon works: the
// daemon run starts for the OpenCode 2 service gets those typed for this
// run (the environment and the config file reach it by themselves). The
// others are not its: credentials and --url are the service file's,
// --directory is the service's alone (armInServiceWatch), the status
// address is a free port (the registry finds it), and --log-file,
// --config and --service-file are passed as spawnServiceWatch's own.
var serviceDaemonFlags = []string{"initial-delay", "max-delay", "idle-interval", "jitter", "max-concurrent", "fast-attempts",
	"slow-interval", "stable-after", "probe", "toast", "netwatch", "log-level", "log-format"}

// serviceDaemonArgs are the serviceDaemonFlags of fs that were typed, as
// watch's arguments.
func serviceDaemonArgs(fs *pflag.FlagSet, typed map[string]bool) []string {
	var out []string
	for _, name := range serviceDaemonFlags {
		if typed[name] {
			out = append(out, "--"+name+"="+fs.Lookup(name).Value.String())
		}
	}
	return out
}

// scrubbed are the variables the background watch must not inherit.
var scrubbed = []string{"OPENCODE_URL", launch.PasswordEnv, launch.UsernameEnv, launch.PasswordEnv2, "MCP_RECONNECT_PASSWORD_FILE"}

// serviceWatchEnv is env without the scrubbed variables.
func serviceWatchEnv(env []string) []string { return launch.WithoutEnv(env, scrubbed...) }
