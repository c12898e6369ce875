package main

import (
	"cmp"
	"fmt"
	"log/slog"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
)

// opencodePIDFlag is watch's flag naming the OpenCode process the daemon
// serves (the OpenCode plugin passes its own process).
const opencodePIDFlag = "opencode-pid"

// openCodeProcess is what watch --opencode-pid serves: that process's
// server, at --url when it is given on the command line (1.x's plugin
// knows it), with the password and username given as for any --url.
// A URL from the environment or the config file is not that process's,
// and [[opencode]] tables name other servers: a daemon per OpenCode
// process watches that one alone.
func (f *watchFlags) openCodeProcess(pid int, log *slog.Logger) (daemon.OpenCodeProcess, error) {
	oc := daemon.OpenCodeProcess{PID: pid, Server: daemon.Target{Username: f.username, Password: f.password},
		ServiceFile: cmp.Or(f.service, defaultServiceFile()), Channels: f.service == ""}
	if pid <= 0 {
		return oc, fmt.Errorf("--%s %d: not a process id", opencodePIDFlag, pid)
	}
	if f.urlSource == "--url" {
		if len(f.urls) != 1 {
			return oc, fmt.Errorf("--%s takes one --url, that process's server; %d given", opencodePIDFlag, len(f.urls))
		}
		oc.Server.URL = f.urls[0]
		if err := checkPlainHTTP(oc.Server.URL); err != nil && f.password != "" && !f.allowHTTPPassword {
			return oc, err
		}
	}
	if entries, err := f.file.servers(); err != nil {
		return oc, err
	} else if len(entries) > 0 {
		log.Info("the config file's [[opencode]] servers are not watched by this daemon: it watches the server of one OpenCode process", "config", f.config, "pid", pid)
	}
	return oc, nil
}
