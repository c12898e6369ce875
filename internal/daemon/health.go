package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sdnotify"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// A watched server is what the status API sees of it: its engine
// (status, reconnects, liveness), whether its client detected it (GET
// /readyz), its process view and the service file it follows.
var _ statusapi.Source = (*watched)(nil)

// Service is the OpenCode 2 service file the server was found through,
// nil unless it follows one that answers.
func (s *watched) Service() *statusapi.Service {
	if s.follow == nil {
		return nil
	}
	cur := s.follow.following()
	if cur.svc.Path == "" {
		return nil
	}
	return &statusapi.Service{File: cur.svc.Path, PID: cur.svc.PID, Version: cur.svc.Version, AlsoRegistered: cur.others}
}

// ServiceFile is the service file the server was set to follow, "" for
// none.
func (s *watched) ServiceFile() string {
	if s.follow == nil {
		return ""
	}
	return s.follow.file
}

// Summary is the engine's, with the MCP process view of a local
// OpenCode.
func (s *watched) Summary() reconnect.Snapshot {
	snap := s.Engine.Summary()
	snap.Processes = s.procs.info()
	return snap
}

// Generation is the generation the client detected, "" before one was.
func (s *watched) Generation() string {
	if g, _ := s.client.Generation(); g != opencode.GenUnknown {
		return g.String()
	}
	return ""
}

// supervise tells systemd how the daemon is, when it runs the daemon as a
// Type=notify service ($NOTIFY_SOCKET): READY=1 once every engine runs
// (the status API serves by then), then, with a watchdog
// ($WATCHDOG_USEC), WATCHDOG=1 every half interval while every engine is
// alive, and none while one is stuck, so systemd restarts a hung daemon.
// Elsewhere it does nothing.
func supervise(ctx context.Context, all []*watched, log *slog.Logger) {
	n, err := sdnotify.FromEnv(os.Getenv)
	if n == nil {
		if err != nil {
			log.Warn("not notifying the service manager", "err", err)
		}
		return
	}
	wd, err := sdnotify.WatchdogInterval(os.Getenv, os.Getpid())
	if err != nil {
		log.Warn("not pinging the service manager's watchdog", "err", err)
	}
	supervisor{notify: n.Notify, watchdog: wd, servers: len(all), log: log,
		alive: func(timeout time.Duration) error {
			for _, w := range all {
				if err := w.Alive(timeout); err != nil {
					return err
				}
			}
			return nil
		}}.run(ctx)
}

// supervisor is supervise's loop, apart from the process environment.
type supervisor struct {
	notify   func(states ...string) error
	watchdog time.Duration // 0: none
	alive    func(timeout time.Duration) error
	servers  int
	log      *slog.Logger
}

// readyPoll is how often the supervisor looks whether the engines run yet.
const readyPoll = 10 * time.Millisecond

func (s supervisor) run(ctx context.Context) {
	poll := time.NewTicker(readyPoll)
	defer poll.Stop()
	for errors.Is(s.alive(time.Second), reconnect.ErrNotStarted) {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
	status := fmt.Sprintf("STATUS=watching %d OpenCode server(s)", s.servers)
	s.send(sdnotify.Ready, status)
	defer s.send(sdnotify.Stopping)
	if s.watchdog <= 0 {
		<-ctx.Done()
		return
	}
	// Half the interval, as sd_watchdog_enabled(3) advises; the check
	// itself waits at most a quarter, so a ping is never late for it.
	tick := time.NewTicker(s.watchdog / 2)
	defer tick.Stop()
	var stuck error
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := s.alive(s.watchdog / 4)
		if !reconnect.Stuck(err) {
			err = nil // as GET /healthz decides
		}
		switch {
		case err != nil && stuck == nil:
			s.log.Error("an engine is stuck; no longer pinging the systemd watchdog, which restarts the daemon", "err", err, "watchdog", s.watchdog)
			s.send("STATUS=stuck: " + err.Error())
		case err == nil && stuck != nil:
			s.log.Info("the engines run again; pinging the systemd watchdog")
			s.send(status)
		}
		stuck = err
		if err == nil {
			s.send(sdnotify.Watchdog)
		}
	}
}

// send sends the states, each on one line: an error can name a directory
// from OpenCode, whose line breaks would otherwise add states of their
// own (WATCHDOG=1, MAINPID=…) to the datagram.
func (s supervisor) send(states ...string) {
	for i, st := range states {
		states[i] = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return ' '
			}
			return r
		}, st)
	}
	if err := s.notify(states...); err != nil {
		s.log.Warn("could not notify the service manager", "err", err)
	}
}
