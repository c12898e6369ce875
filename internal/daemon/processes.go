package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// The MCP process view of a local OpenCode. When OpenCode runs on this
// machine as this user (always under run: it is the wrapper's child;
// under watch when the process listening on its loopback port, or its
// 2.x pid, is this user's), the daemon finds that process and runs a
// procview.View of it for the engine (procview.View.Run: the scans, the
// exit watcher, the record), and finds the next one when it exits or is
// replaced.

// procWatch is one watched server's process view.
type procWatch struct {
	eng    *reconnect.Engine
	client *opencode.Server
	// pid, when set, is the OpenCode process (run's child).
	pid int
	log *slog.Logger
	// again is signalled when the server may now be another process.
	again chan struct{}
	// newExits makes the exit watcher (procview.NewExits for this
	// machine's table; nil: scans alone, as for a recorded table).
	newExits func() (*procview.Exits, error)
	// record keeps what was seen, for the orphans' evidence (nil: none).
	record *procview.Record
	// view is the OpenCode process watched now; nil when none.
	view atomic.Pointer[procview.View]
}

func newProcWatch(eng *reconnect.Engine, client *opencode.Server, pid int, log *slog.Logger) *procWatch {
	return &procWatch{eng: eng, client: client, pid: pid, log: log, again: make(chan struct{}, 1)}
}

// where names the server in log lines.
func (p *procWatch) where() string {
	if p.client == nil {
		return ""
	}
	return p.client.URL()
}

// replaced tells the watch that OpenCode may be another process now.
func (p *procWatch) replaced() { signal(p.again) }

// signal wakes the reader of ch, unless a wake-up is pending already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// info is what status shows of the processes; nil while no local
// OpenCode is watched.
func (p *procWatch) info() *procview.Status {
	if p == nil {
		return nil
	}
	if v := p.view.Load(); v != nil {
		return v.Status()
	}
	return nil
}

// run watches until ctx ends: finds OpenCode's process, watches its
// children until it exits or is replaced, and looks again.
func (p *procWatch) run(ctx context.Context) {
	tab, err := procview.System()
	if err != nil {
		p.log.Debug("no process view", "err", err)
		return
	}
	p.newExits = procview.NewExits
	if rec, err := procview.DefaultRecord(); err == nil {
		p.record = &rec
		if all, err := rec.Load(); err == nil {
			rec.Prune(tab, all)
		}
	}
	for ctx.Err() == nil {
		pid, err := p.find(tab)
		if err == nil {
			err = p.watch(ctx, tab, pid)
		}
		// Look again when OpenCode may be another process, or a while
		// later: never in a loop (run's child that exited stays the same
		// pid until the wrapper ends).
		wait := 2 * time.Second // it exited: its next process comes soon
		if err != nil {
			p.log.Debug("opencode is not a local process of this user; no process view", "url", p.where(), "err", err)
			wait = time.Minute
		}
		select {
		case <-ctx.Done():
			return
		case <-p.again:
		case <-time.After(wait):
		}
	}
}

// find is the local OpenCode process: run's child, else the process of
// this user listening on the server's loopback port, else a 2.x server's
// own pid when it is this user's OpenCode.
func (p *procWatch) find(tab procview.Table) (int, error) {
	if p.pid > 0 {
		return p.pid, nil
	}
	port, err := p.loopbackPort()
	if err != nil {
		return 0, err
	}
	// The pid a 2.x server reports is its own only in its own pid
	// namespace: in a container published on loopback it names some
	// process here. Taken only when it is this user's, in this
	// namespace, and holds the listener (macOS cannot tell the listener:
	// there the process and its owner are checked).
	if pid := p.client.PID(); pid > 0 {
		if err := procview.VerifyServerPID(tab, pid, port, os.Getuid()); err == nil || errors.Is(err, errors.ErrUnsupported) {
			if proc, err := tab.Read(pid); err == nil && proc.UID == os.Getuid() && procview.IsOpenCode(proc) {
				return pid, nil
			}
		}
	}
	pid, err := procview.ListenerPID(port, os.Getuid())
	if err != nil {
		return 0, err
	}
	// What listens may be a tunnel or a proxy (ssh -L, socat) to an
	// OpenCode elsewhere: its children are not OpenCode's.
	if proc, err := tab.Read(pid); err != nil || !procview.IsOpenCode(proc) {
		return 0, fmt.Errorf("the process listening on port %d (pid %d) is not OpenCode", port, pid)
	}
	return pid, nil
}

// loopbackPort is the port of the server's URL, when its host is this
// machine's loopback: the only case where a process here can be it.
func (p *procWatch) loopbackPort() (int, error) {
	u, err := url.Parse(p.client.URL())
	if err != nil {
		return 0, err
	}
	if host := u.Hostname(); !loopback.Host(host) {
		return 0, fmt.Errorf("%s is not a loopback address", host)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0, fmt.Errorf("no port in %s", p.client.URL())
	}
	return port, nil
}

// watch follows one OpenCode process's children until it exits, the
// server is replaced, or ctx ends.
func (p *procWatch) watch(ctx context.Context, tab procview.Table, pid int) error {
	v, err := procview.NewView(tab, pid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-p.again:
			signal(p.again) // for run's loop: look for it now
			cancel()
		case <-ended:
		}
	}()
	var h procview.Handler
	if p.eng != nil {
		// The engine asks it until the next one: once OpenCode is gone
		// it knows no successor, and its clock still runs.
		p.eng.SetProcessView(v)
		h = p.eng
	}
	p.view.Store(v)
	defer p.view.Store(nil)
	return v.Run(ctx, h, procview.Options{Exits: p.newExits, Record: p.record, Log: p.log.With("url", p.where())})
}
