package reconnect

import (
	"context"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/probe"
)

// Remote servers get two watchers beside the status reads. A failed one's
// endpoint is probed (TCP, TLS; no MCP, no credentials) about once a
// second: when it goes from unreachable to reachable, the directory is
// due at once. A connected one's endpoint is watched over one held
// connection (shared by every directory, probe.Hub): when the server
// restarts behind OpenCode's back, the directory is due at once. Neither
// connects anything: the check that follows decides from a fresh read,
// and the attempt is charged to the server's episode.

// endpoints starts or stops the probes and restart watches of the
// directory's remote servers after a read, and returns the servers whose
// restart watch must start. Caller holds Engine.mu.
func (e *Engine) endpoints(d *dir, now time.Time) (watch []string) {
	if e.prober == nil {
		return nil
	}
	for _, name := range opencode.Names(d.servers) {
		s := d.servers[name]
		if d.config.remote(name) == "" {
			continue
		}
		switch s.status {
		case opencode.StatusConnected:
			s.stopProbes()
			if !s.watched() {
				watch = append(watch, name)
			}
		case opencode.StatusFailed:
			s.endWatch()
			if s.ep.Phase(e.cfg.Backoff) == backoff.Stopped {
				s.stopProbes() // no attempt is allowed: nothing to probe for
			} else if w := s.watching(); !w.probing && w.nextProbe.IsZero() {
				if w.downSince.IsZero() {
					w.downSince = now
				}
				w.nextProbe = now.Add(probe.Interval(0))
			}
		default:
			s.stopProbes()
			s.endWatch()
		}
	}
	return watch
}

// probeDue reports whether s's endpoint probe is due at now and none runs.
func (s *server) probeDue(now time.Time) bool {
	w := s.endpoint
	return w != nil && !w.probing && !w.nextProbe.IsZero() && !now.Before(w.nextProbe)
}

// startProbes runs the probes that are due, within the global probe rate.
func (e *Engine) startProbes(ctx context.Context, d *dir, work *sync.WaitGroup) {
	if e.prober == nil {
		return
	}
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	due := false // most wakes have no probe due: no sorted copy of the names then
	for _, s := range d.servers {
		if due = s.probeDue(now); due {
			break
		}
	}
	if !due {
		return
	}
	for _, name := range opencode.Names(d.servers) {
		s := d.servers[name]
		if !s.probeDue(now) {
			continue
		}
		url := d.config.remote(name)
		if _, fresh := e.prober.Recent(url); !fresh {
			// A real dial: within the global rate.
			if !e.prober.Allow() {
				s.endpoint.nextProbe = now.Add(probe.Interval(0) / 4)
				continue
			}
			e.metrics.Probes.Inc()
		}
		s.endpoint.probing, s.endpoint.nextProbe = true, time.Time{}
		work.Add(1)
		go func() {
			defer work.Done()
			err := e.prober.Shared(ctx, url)
			e.post(d, func() { e.finishProbe(d, name, err) })
		}()
	}
}

// finishProbe makes the directory due at once when a failed server's
// endpoint answers after it did not, if the server's episode allows an
// attempt outside its schedule. An endpoint that keeps answering while
// its server stays failed is left to the backoff: only a change from
// unreachable to reachable is news.
func (e *Engine) finishProbe(d *dir, name string, err error) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := d.servers[name]
	if s == nil {
		return
	}
	w := s.watching()
	w.probing = false
	if s.status != opencode.StatusFailed || s.ep.Phase(e.cfg.Backoff) == backoff.Stopped {
		s.stopProbes()
		return
	}
	up := err == nil
	if up && !w.reachable && !s.connecting {
		if at, ok := s.ep.NextAllowed(e.cfg.Backoff, backoff.Extra); ok {
			e.log.Debug("endpoint reachable again; checking", "url", e.url, "directory", d.path, "server", name, "at", later(at, now))
			s.trig |= trigProbe
			d.wakeBy(later(at, now))
		}
	}
	if !up {
		s.trig &^= trigProbe // it went away again before the check
		if w.reachable {
			w.downSince = now
		}
	}
	w.reachable = up
	w.nextProbe = now.Add(probe.Interval(now.Sub(w.downSince)))
}

// startWatches starts watching the endpoints of connected remote servers
// for restarts. Each watch ends with the directory, or when the
// server stops being connected (endWatch).
func (e *Engine) startWatches(ctx context.Context, d *dir, names []string, work *sync.WaitGroup) {
	if e.prober == nil || len(names) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range names {
		s := d.servers[name]
		url := d.config.remote(name)
		if s == nil || s.watched() || url == "" || s.status != opencode.StatusConnected {
			continue
		}
		restartedCh, unsubscribe := e.hub.Watch(url)
		wctx, cancel := context.WithCancel(ctx)
		s.watching().stopWatch = func() { unsubscribe(); cancel() }
		work.Add(1)
		go func() {
			defer work.Done()
			defer cancel()
			defer unsubscribe()
			select {
			case <-restartedCh:
				if wctx.Err() == nil { // not ended meanwhile (endWatch)
					e.post(d, func() { e.endpointRestarted(d, name) })
				}
			case <-wctx.Done():
			}
		}()
	}
}

// endpointRestarted makes the directory due at once for a connected remote server
// whose endpoint restarted, if its episode allows an attempt outside the
// schedule. The check decides from a fresh read: a server the user
// disabled meanwhile is left alone.
func (e *Engine) endpointRestarted(d *dir, name string) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := d.servers[name]
	if s == nil {
		return
	}
	s.endWatch()
	if s.status != opencode.StatusConnected || s.connecting {
		return
	}
	if at, ok := s.ep.NextAllowed(e.cfg.Backoff, backoff.Extra); ok {
		s.trig |= trigRestart
		d.wakeBy(later(at, now))
	}
}
