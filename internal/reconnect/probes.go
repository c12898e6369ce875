package reconnect

import (
	"context"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// Remote servers get two watchers beside the status reads, both shared by
// every directory using the endpoint (probe.Hub). A failed one's endpoint
// is probed (TCP, TLS; no MCP, no credentials) about once a second: when
// it goes from unreachable to reachable, the directory is due at once. A
// connected one's endpoint is watched over one held connection: when the
// server restarts behind OpenCode's back, the directory is due at once.
// Neither connects anything, nor waits for a check slot: the check that
// follows decides from a fresh read, and the attempt is charged to the
// server's episode.

// endpoints starts or stops the probes and restart watches of the
// directory's remote servers after a read. Caller holds Engine.mu.
func (e *Engine) endpoints(ctx context.Context, d *dir) {
	if e.hub == nil || ctx.Err() != nil {
		return
	}
	for name, s := range d.servers {
		url := d.config.remote(name)
		if url == "" {
			continue
		}
		switch s.status {
		case opencode.StatusConnected:
			s.stopProbes()
			if s.watch == nil {
				stop := new(func())
				*stop = e.hub.Watch(url, func() { e.endpointRestarted(d, name, stop) })
				s.watch = stop
			}
		case opencode.StatusFailed:
			s.endWatch()
			if s.ep.Phase(e.cfg.Backoff) == backoff.Stopped {
				s.stopProbes() // no attempt is allowed: nothing to probe for
			} else if s.probes == nil {
				stop := new(func())
				*stop = e.hub.Reachable(url, func(up bool) { e.probed(d, name, stop, up) })
				s.probes = stop
			}
		default:
			s.stopProbes()
			s.endWatch()
		}
	}
}

// subscribed returns d's server name while sub is its endpoint's probes
// (or its watch), else nil: the hub may tell a subscription once more
// after it stopped. Caller holds Engine.mu.
func (e *Engine) subscribed(d *dir, name string, sub *func(), probes bool) *server {
	s := d.servers[name]
	if e.dirs[d.path] != d || s == nil || probes && s.probes != sub || !probes && s.watch != sub {
		return nil
	}
	return s
}

// probed makes the directory due at once when a failed server's endpoint
// answers after it did not (the hub tells only such changes), if the
// server's episode allows an attempt outside its schedule. An endpoint
// that keeps answering while its server stays failed is left to the
// backoff.
func (e *Engine) probed(d *dir, name string, sub *func(), up bool) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.subscribed(d, name, sub, true)
	switch {
	case s == nil:
	case s.status != opencode.StatusFailed || s.ep.Phase(e.cfg.Backoff) == backoff.Stopped:
		s.stopProbes()
	case !up:
		s.trig &^= trigProbe // it went away again before the check
	case !s.connecting:
		if at, ok := s.ep.NextAllowed(e.cfg.Backoff, backoff.Extra); ok {
			e.log.Debug("endpoint reachable again; checking", "url", e.url, "directory", d.path, "server", name, "at", backoff.Later(at, now))
			s.trig |= trigProbe
			d.wakeBy(backoff.Later(at, now))
		}
	}
}

// endpointRestarted makes the directory due at once for a connected
// remote server whose endpoint restarted, if its episode allows an
// attempt outside the schedule. The check decides from a fresh read: a
// server the user disabled meanwhile is left alone.
func (e *Engine) endpointRestarted(d *dir, name string, sub *func()) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.subscribed(d, name, sub, false)
	if s == nil {
		return
	}
	s.endWatch()
	if s.status != opencode.StatusConnected || s.connecting {
		return
	}
	if at, ok := s.ep.NextAllowed(e.cfg.Backoff, backoff.Extra); ok {
		s.trig |= trigRestart
		d.wakeBy(backoff.Later(at, now))
	}
}
