package main

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/launch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// defaultServiceFile is where OpenCode 2's background service records its
// URL and password: $XDG_STATE_HOME/opencode/service.json, on macOS too.
func defaultServiceFile() string {
	home, _ := os.UserHomeDir()
	return opencode.ServiceFilePath(runtime.GOOS, os.Getenv, home)
}

// v2ServiceDefaultURL is the shared service's usual address, shown until
// its service file says otherwise.
const v2ServiceDefaultURL = "http://127.0.0.1:49374"

// serviceFile decides whether to follow the OpenCode 2 background service:
// when --service-file names one, or when neither a URL nor a password was
// given (by flag, environment or config file) and the default service file
// exists. Without a service file and without --url, the 1.x default stays.
func (f *watchFlags) serviceFile(fs *pflag.FlagSet) string {
	if f.service != "" {
		return f.service
	}
	if fs.Changed("url") || fs.Changed("password") {
		return ""
	}
	file := defaultServiceFile()
	if _, err := os.Stat(file); err != nil {
		return ""
	}
	return file
}

// serviceServer is the OpenCode 2 service described by file, as one
// server to watch: its URL and password are read from the file at start
// and again whenever the server cannot be reached (it restarted on another
// port, or with another password). The password stays in memory.
func serviceServer(file string) daemon.Server {
	sc := daemon.Server{ServiceFile: file, URL: v2ServiceDefaultURL}
	if svc, err := opencode.ReadServiceFile(file); err == nil {
		sc.URL = svc.URL
	}
	sc.Discover = func(ctx context.Context) (string, string, error) {
		svc, err := opencode.DiscoverService(ctx, file, opencode.Options{})
		if err != nil {
			return "", "", err
		}
		return svc.URL, svc.Password(), nil
	}
	return sc
}

// spawnServiceWatch starts `self watch` for the OpenCode 2 service in
// the background (launch.StartDetached: a session of its own, so it
// outlives the terminal, and not this process's child, so the TUI this
// process becomes never holds it as a zombie), logging to logFile. Its
// environment names no OpenCode URL, user or password: the service file
// says them, and a password meant for another server must not reach it.
func spawnServiceWatch(self, file, logFile, config string) func() error {
	return func() error {
		args := []string{"watch", "--service-file", file, "--status-addr", "127.0.0.1:0", "--log-file", logFile}
		if config != "" {
			args = append(args, "--config", config)
		}
		_, err := launch.StartDetached(self, args, serviceWatchEnv(os.Environ()))
		return err
	}
}

// scrubbed are the variables the background watch must not inherit.
var scrubbed = []string{"OPENCODE_URL", launch.PasswordEnv, launch.UsernameEnv, launch.PasswordEnv2}

// serviceWatchEnv is env without the scrubbed variables.
func serviceWatchEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(scrubbed, name)
	})
}
