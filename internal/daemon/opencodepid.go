package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// A daemon for one OpenCode process (watch --opencode-pid), as the
// OpenCode plugin starts it from inside OpenCode (tools/distpkg/npm/plugin).
// A 1.x plugin is told its server's URL; a 2.x plugin only its own
// process (docs/opencode.md#plugins), so the server is found from the
// process: the OpenCode 2 service file that names it, else the port it
// listens on. The daemon ends when that process ends, and the next
// OpenCode's plugin starts the next one.

// OpenCodeProcess is the OpenCode process a daemon serves, and where its
// server may be found.
type OpenCodeProcess struct {
	// PID is the process.
	PID int
	// Server holds the credentials, and the URL when the caller knows
	// it (1.x's plugin does); it is taken when the process listens on
	// its port, or when that cannot be read here.
	Server Target
	// ServiceFile is where OpenCode 2 services register; with Channels,
	// the other release channels' files beside it too.
	ServiceFile string
	Channels    bool
}

// findFor bounds the look for the server of an OpenCode process: its
// plugin runs once it serves (a request booted a directory), so the
// first look finds it; a process that serves no API at all (a 1.x TUI
// started without --port) is given up on after this.
var findFor = 10 * time.Second

// dupWait bounds the wait for the daemon that refused this one to end:
// OpenCode restarted on its port starts this daemon while the previous
// OpenCode's daemon may still be ending.
var dupWait = 5 * time.Second

// errOpenCodeEnded ends a daemon whose OpenCode process ended.
var errOpenCodeEnded = errors.New("the OpenCode process ended")

// RunFor is Run for the server of OpenCode process oc.PID (cfg.Servers
// is set to it), until that process ends. When a running daemon already
// watches that server, RunFor waits (up to dupWait) for it to end, then
// tries once more; the refusal stands otherwise.
func RunFor(ctx context.Context, cfg Config, oc OpenCodeProcess, log *slog.Logger) error {
	ctx, stop, err := untilExit(ctx, oc.PID)
	if err != nil {
		return err
	}
	defer stop()
	sc, err := oc.find(ctx)
	if err != nil {
		if context.Cause(ctx) == errOpenCodeEnded {
			log.Info("opencode ended before its server was found; stopping", "pid", oc.PID)
			return nil
		}
		return err
	}
	cfg.Servers = []Target{sc}
	err = Run(ctx, cfg, log)
	if dup := (*DuplicateError)(nil); errors.As(err, &dup) && waitEnd(ctx, dup.Running.PID, dupWait, log) {
		err = Run(ctx, cfg, log)
	}
	if context.Cause(ctx) == errOpenCodeEnded {
		log.Info("opencode ended; stopping", "pid", oc.PID)
		return nil
	}
	return err
}

// waitEnd waits up to d for process pid (a daemon) to end, and reports
// whether it did.
func waitEnd(ctx context.Context, pid int, d time.Duration, log *slog.Logger) bool {
	log.Info("another daemon watches this OpenCode server; waiting for it to end", "other_pid", pid, "for", d)
	octx, stop, err := untilExit(ctx, pid)
	if err != nil {
		return ctx.Err() == nil // gone already
	}
	defer stop()
	select {
	case <-octx.Done():
		return ctx.Err() == nil
	case <-time.After(d):
		return false
	}
}

// find is the server of oc's process (its PID set, so the process view
// watches that process): oc.Server when the process listens on its
// URL's port; else the
// OpenCode 2 service whose file names the process; else the first port
// it listens on. It looks again every 200 ms until findFor has passed or
// ctx ends.
func (oc OpenCodeProcess) find(ctx context.Context) (Target, error) {
	deadline := time.Now().Add(findFor)
	for {
		addrs, err := procview.ListenAddrs(oc.PID)
		sc, file := oc.Server, oc.serviceFile()
		switch {
		case sc.URL != "" && listensOn(addrs, sc.URL):
		case file != "":
			sc = ServiceServer(file, false, nil)
		case len(addrs) > 0:
			sc.URL = urlOf(addrs)
		case time.Now().After(deadline):
			return Target{}, oc.notFound(addrs, err)
		default:
			select {
			case <-ctx.Done():
				return Target{}, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		sc.PID = oc.PID
		return sc, nil
	}
}

// notFound says why no server of oc's process was found.
func (oc OpenCodeProcess) notFound(addrs []netip.AddrPort, err error) error {
	what := "OpenCode 2 service file names it, and it listens on no TCP port (an OpenCode TUI started without --port serves no API)"
	if err != nil {
		what = fmt.Sprintf("OpenCode 2 service file names it, and its ports cannot be read (%v)", err)
	}
	if oc.Server.URL != "" {
		return fmt.Errorf("OpenCode process %d does not listen on %s (its TCP ports: %v), no %s: nothing to watch",
			oc.PID, opencode.Redact(oc.Server.URL), addrs, what)
	}
	return fmt.Errorf("OpenCode process %d: no %s: nothing to watch", oc.PID, what)
}

// serviceFile is the OpenCode 2 service file that names oc's process, or
// "".
func (oc OpenCodeProcess) serviceFile() string {
	regs, _ := opencode.Registrations(oc.ServiceFile, oc.Channels)
	for _, r := range regs {
		if svc, err := opencode.ReadServiceFile(r.Path); err == nil && svc.PID == oc.PID {
			return r.Path
		}
	}
	return ""
}

// listensOn reports whether one of addrs has rawURL's port.
func listensOn(addrs []netip.AddrPort, rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && slices.ContainsFunc(addrs, func(a netip.AddrPort) bool { return strconv.Itoa(int(a.Port())) == u.Port() })
}

// urlOf is the URL of the first of addrs (sorted by port) that this
// machine's loopback reaches, else of the first: an unspecified address
// is reached at 127.0.0.1 (OpenCode's own default host).
func urlOf(addrs []netip.AddrPort) string {
	reach := func(a netip.AddrPort) bool { return a.Addr().IsUnspecified() || a.Addr().IsLoopback() }
	a := addrs[0]
	if i := slices.IndexFunc(addrs, reach); i >= 0 {
		a = addrs[i]
	}
	host := a.Addr().String()
	if a.Addr().IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(int(a.Port())))
}

// untilExit returns a context that ends, with cause errOpenCodeEnded,
// when process pid ends (or when ctx does), and the function that stops
// watching it. The kernel tells of the exit (procview.Exits: a pidfd);
// where it cannot (a kernel without pidfds), the process is looked at
// every second. A pid that does not exist is an error, and so is a
// system without a process view (macOS): nothing there could tie a
// server to the process.
func untilExit(ctx context.Context, pid int) (context.Context, func(), error) {
	tab, err := procview.System()
	if err != nil {
		return nil, nil, err
	}
	proc, err := tab.Stat(pid)
	if err == nil && proc.Zombie {
		err = procview.ErrGone
	}
	if err != nil {
		return nil, nil, fmt.Errorf("OpenCode process %d: %w", pid, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	exits, err := procview.NewExits()
	if err == nil {
		if err = exits.Add(tab, proc); err != nil {
			_ = exits.Close()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err == nil {
			exits.Run(ctx, func(procview.Exit) { cancel(errOpenCodeEnded) })
			_ = exits.Close()
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if st, err := tab.Stat(pid); errors.Is(err, procview.ErrGone) || err == nil && (st.Birth != proc.Birth || st.Zombie) {
				cancel(errOpenCodeEnded)
				return
			}
		}
	}()
	return ctx, func() { cancel(nil); <-done }, nil
}
