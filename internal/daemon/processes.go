package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// The MCP process view of a local OpenCode (issue: what OpenCode does not
// tell). When OpenCode runs on this machine as this user (always under
// run: it is the wrapper's child; under watch when the process listening
// on its loopback port, or its 2.x pid, is this user's), the daemon
// watches its MCP children: the child serving each armed directory's
// local server, matched by working directory and command. A child that
// exits is told to the engine (ChildExited), which matters where OpenCode
// itself does not say (before 1.15 a dead stdio server stays
// "connected"); status shows duplicates and orphans.

// scanEvery is the view's idle scan period (procview stretches it when a
// scan is slow: BENCHMARKS.md).
const scanEvery = 2 * time.Second

// orphansEvery bounds how often status looks for orphans: that reads the
// whole process table.
const orphansEvery = 10 * time.Second

// procWatch is one watched server's process view.
type procWatch struct {
	eng    *reconnect.Engine
	client *opencode.Server
	// pid, when set, is the OpenCode process (run's child).
	pid int
	log *slog.Logger
	// again is signalled when the server may now be another process.
	again chan struct{}

	mu        sync.Mutex
	table     procview.Table
	root      int // the OpenCode pid watched now; 0 when none
	last      procview.Snapshot
	servers   []procview.Server
	orphansAt time.Time
	orphans   []reconnect.OrphanProcess
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
func (p *procWatch) replaced() {
	select {
	case p.again <- struct{}{}:
	default:
	}
}

// run watches until ctx ends: finds OpenCode's process, watches its
// children until it exits or is replaced, and looks again.
func (p *procWatch) run(ctx context.Context) {
	tab, err := procview.System()
	if err != nil {
		p.log.Debug("no process view", "err", err)
		return
	}
	p.mu.Lock()
	p.table = tab
	p.mu.Unlock()
	for ctx.Err() == nil {
		pid, err := p.find(tab)
		if err == nil {
			err = p.watch(ctx, tab, pid)
		}
		if err != nil {
			p.log.Debug("opencode is not a local process of this user; no process view", "url", p.where(), "err", err)
		}
		// Look again when OpenCode may be another process, or a while
		// later: never in a loop (run's child that exited stays the same
		// pid until the wrapper ends).
		wait := time.Minute
		if err == nil {
			wait = scanEvery // it exited: its next process comes soon
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
	u, err := url.Parse(p.client.URL())
	if err != nil {
		return 0, err
	}
	host, portStr := u.Hostname(), u.Port()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0, fmt.Errorf("%s is not a loopback address", host)
	}
	if pid := p.client.PID(); pid > 0 {
		if proc, err := tab.Read(pid); err == nil && proc.UID == os.Getuid() && procview.IsOpenCode(proc) {
			return pid, nil
		}
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return 0, fmt.Errorf("no port in %s", p.client.URL())
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

// watch follows one OpenCode process's children until it exits, the
// server is replaced, or ctx ends.
func (p *procWatch) watch(ctx context.Context, tab procview.Table, pid int) error {
	v, err := procview.NewView(tab, pid)
	if err != nil {
		return err
	}
	p.log.Debug("watching opencode's MCP processes", "url", p.client.URL(), "pid", pid)
	p.mu.Lock()
	p.root, p.last = pid, procview.Snapshot{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.root, p.last = 0, procview.Snapshot{}
		p.mu.Unlock()
	}()
	var prev procview.Snapshot
	gen := ^uint64(0)
	every := scanEvery
	for {
		if g, locals, changed := p.eng.LocalServers(gen); changed {
			gen = g
			servers := make([]procview.Server, 0, len(locals))
			for _, l := range locals {
				servers = append(servers, procview.Server{Directory: l.Directory, Name: l.Name, Command: l.Command, Cwd: l.Cwd})
			}
			v.SetServers(servers)
			p.mu.Lock()
			p.servers = servers
			p.mu.Unlock()
		}
		start := time.Now()
		s, err := v.Scan()
		took := time.Since(start)
		if err == nil {
			for _, ev := range procview.Diff(prev, s) {
				switch ev.Kind {
				case procview.Exited:
					p.log.Debug("MCP server process exited", "url", p.client.URL(), "directory", ev.Key.Directory, "server", ev.Key.Name, "child", ev.Child)
					if _, serving := s.Child(ev.Key); serving {
						// Another child still serves it (OpenCode already
						// started a new one, or a duplicate was ended):
						// nothing to repair.
						continue
					}
					p.eng.ChildExited(ev.Key.Directory, ev.Key.Name, ev.Child.Start, ev.At)
				case procview.Started:
					p.eng.ChildStarted(ev.Key.Directory, ev.Key.Name, ev.At)
				}
			}
			prev = s
			p.mu.Lock()
			p.last = s
			p.mu.Unlock()
			if s.Gone {
				return nil // OpenCode exited: find the next one
			}
		}
		every = procview.ScanPeriod(scanEvery, took)
		select {
		case <-ctx.Done():
			return nil
		case <-p.again:
			p.replaced() // for run's loop: look for it now
			return nil
		case <-time.After(every):
		}
	}
}

// info is what status shows of the processes; nil while no local
// OpenCode is watched.
func (p *procWatch) info() *reconnect.Processes {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.root == 0 || p.last.At.IsZero() {
		return nil
	}
	out := &reconnect.Processes{OpenCodePID: p.root}
	for _, cs := range p.last.Servers {
		out.Children += len(cs)
	}
	for _, d := range p.last.Duplicates() {
		for _, k := range d.Keys {
			g := reconnect.ProcessGroup{Directory: k.Directory, Server: k.Name}
			for _, c := range d.Children {
				g.PIDs = append(g.PIDs, c.PID)
				g.Command = c.Command()
			}
			out.Duplicates = append(out.Duplicates, g)
		}
	}
	if time.Since(p.orphansAt) >= orphansEvery && p.table != nil {
		p.orphansAt = time.Now()
		p.orphans = p.findOrphans()
	}
	out.Orphans = p.orphans
	for _, o := range out.Orphans {
		if o.Proven {
			out.Fix = "mcp-reconnect doctor --reap"
		}
	}
	return out
}

// findOrphans lists this user's MCP processes that run the command of an
// armed directory's local server and whose OpenCode is gone or is not the
// one watched. Caller holds p.mu.
func (p *procWatch) findOrphans() []reconnect.OrphanProcess {
	found, err := procview.Orphans(p.table, p.servers, procview.Scope{UID: os.Getuid(), Watched: []int{p.root}})
	if err != nil && !errors.Is(err, procview.ErrGone) {
		p.log.Debug("could not look for orphaned MCP processes", "err", err)
	}
	var out []reconnect.OrphanProcess
	for _, o := range found {
		if o.Parentage == procview.ChildOfOtherOpenCode {
			// A child of another OpenCode that runs (a second TUI) is its
			// live server, not something left over.
			continue
		}
		op := reconnect.OrphanProcess{PID: o.PID, PPID: o.PPID, Cwd: o.Cwd, Command: o.Command, Proven: o.Evidence.Proven(), Why: o.Why}
		for _, k := range o.Servers {
			op.Servers = append(op.Servers, k.Directory+": "+k.Name)
		}
		out = append(out, op)
	}
	return out
}
