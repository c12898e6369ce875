package main

import (
	"fmt"
	"io"

	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

// brewRuns reports whether `brew services` runs the daemon: then the
// service is on, whether or not `service install` wrote one.
func brewRuns(r service.Report) bool {
	return r.Brew != nil && r.Brew.Running != nil && r.Brew.Running.Active
}

// writeBrewService is service status's line for a brew services install.
func writeBrewService(w io.Writer, b *service.BrewService) {
	state := "unknown: " + oneLineErr(b.RunningError)
	if b.Running != nil {
		state = b.Running.State
		if b.Running.PID > 0 {
			state += fmt.Sprintf(", pid %d", b.Running.PID)
		}
	}
	fmt.Fprintf(w, "homebrew:  brew services keeps mcp-reconnect on (%s): %s; logs in $(brew --prefix)/var/log/mcp-reconnect.log\n", termsafe.Line(b.Path), termsafe.Line(state))
}
