package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
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

// spawnServiceWatch starts `mcp-reconnect watch` for the OpenCode 2
// service in the background, in a session of its own so it outlives the
// terminal, logging to logFile. Its environment names no OpenCode URL or
// password: the service file says both.
func spawnServiceWatch(file, logFile, config string) func() error {
	return func() error {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		args := []string{"watch", "--service-file", file, "--status-addr", "127.0.0.1:0", "--log-file", logFile}
		if config != "" {
			args = append(args, "--config", config)
		}
		cmd := exec.Command(self, args...)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			name, _, _ := strings.Cut(kv, "=")
			return name == "OPENCODE_URL" || name == "OPENCODE_SERVER_PASSWORD" || name == "OPENCODE_SERVER_USERNAME"
		})
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		return cmd.Process.Release()
	}
}
