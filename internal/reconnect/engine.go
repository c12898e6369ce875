// Package reconnect is the engine that keeps one OpenCode server's MCP
// servers connected. It is a small level-triggered controller: for each
// armed project directory one loop reads GET /mcp, compares it with what it
// wants (every server that OpenCode reports as failed connected again) and
// acts, following the schedule in package backoff. Events from OpenCode only
// arm directories and wake loops; they are never the source of truth.
package reconnect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/probe"
)

// OpenCode is what the engine needs from an OpenCode server; *opencode.Client
// implements it.
type OpenCode interface {
	MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error)
	Connect(ctx context.Context, dir, name string) error
	MCPConfig(ctx context.Context, dir string) (map[string]opencode.MCPEntry, error)
}

// Config is the engine's tunables. Start from DefaultConfig; Validate once.
type Config struct {
	// Backoff is the per-server schedule: initial delay, cap, jitter, fast
	// attempts and slow interval.
	Backoff backoff.Policy
	// IdleInterval is the re-check period while nothing is due (default 30s).
	IdleInterval time.Duration
	// MaxConcurrent bounds connect calls in flight across all directories
	// (default 2).
	MaxConcurrent int
	// SlotWait is how long a server that found no free connect slot waits
	// (jittered ±50%) before it tries again, uncharged (default 250ms).
	SlotWait time.Duration
}

// DefaultConfig has the SPEC's defaults.
var DefaultConfig = Config{
	Backoff:       backoff.Default,
	IdleInterval:  30 * time.Second,
	MaxConcurrent: 2,
	SlotWait:      250 * time.Millisecond,
}

// Validate reports the first setting that cannot work, naming its flag.
func (c Config) Validate() error {
	if err := c.Backoff.Validate(); err != nil {
		return err
	}
	switch {
	case c.IdleInterval <= 0:
		return errors.New("--idle-interval must be positive")
	case c.MaxConcurrent < 1:
		return errors.New("--max-concurrent must be at least 1")
	case c.SlotWait <= 0:
		return errors.New("slot wait must be positive")
	}
	return nil
}

// Engine watches the armed directories of one OpenCode server.
type Engine struct {
	cfg     Config
	oc      OpenCode
	url     string
	log     *slog.Logger
	metrics *metrics.Metrics
	budget  *Budget
	onEvent func(Event)
	prober  *probe.Prober
	hub     *probe.Hub // endpoint watches shared by every directory

	mu      sync.Mutex
	ctx     context.Context // set by Run; nil before and after
	dirs    map[string]*dir
	pending map[string]string // armed before Run: dir → reason
	stream  StreamState
	wg      sync.WaitGroup
}

// Options are the engine's collaborators. Zero fields get harmless defaults.
type Options struct {
	// URL names the OpenCode server in snapshots, events and logs.
	URL string
	// Log receives the engine's log lines.
	Log *slog.Logger
	// Metrics counts what the engine does.
	Metrics *metrics.Metrics
	// Budget is shared by every engine of one daemon (default: a budget of
	// Config.MaxConcurrent for this engine alone).
	Budget *Budget
	// OnEvent receives every event; it must not block.
	OnEvent func(Event)
	// Prober probes failed remote servers' endpoints; nil turns probes off.
	Prober *probe.Prober
}

// New returns an engine; call Run to start it.
func New(cfg Config, oc OpenCode, o Options) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, oc: oc, url: o.URL, log: o.Log, metrics: o.Metrics, budget: o.Budget, onEvent: o.OnEvent, prober: o.Prober,
		dirs: map[string]*dir{}, pending: map[string]string{}}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.metrics == nil {
		e.metrics = metrics.New()
	}
	if e.budget == nil {
		e.budget = NewBudget(cfg.MaxConcurrent)
	}
	if e.onEvent == nil {
		e.onEvent = func(Event) {}
	}
	if e.prober != nil {
		e.hub = probe.NewHub(e.prober)
	}
	return e, nil
}

// Run runs the engine until ctx ends, then stops every loop and waits for
// it. Directories armed before Run start with it.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.ctx != nil {
		e.mu.Unlock()
		return errors.New("reconnect: engine already running")
	}
	e.ctx = ctx
	var evs []Event
	for d, reason := range e.pending {
		evs = append(evs, e.armLocked(d, reason))
	}
	e.pending = nil
	e.mu.Unlock()
	e.publish(evs...)

	<-ctx.Done()

	e.mu.Lock()
	for _, d := range e.dirs {
		d.cancel()
	}
	e.dirs = map[string]*dir{}
	e.metrics.ArmedDirectories.Set(0)
	e.mu.Unlock()
	e.wg.Wait()
	if e.hub != nil {
		e.hub.Close()
	}
	return nil
}

func (e *Engine) publish(evs ...Event) {
	for _, ev := range evs {
		if ev.Type == "" {
			continue
		}
		ev.URL = e.url
		e.onEvent(ev)
	}
}

// validDir reports whether an event's directory is a project directory the
// engine may arm: OpenCode uses "global" (and "") for events of no directory.
func validDir(d string) bool {
	return d != "" && filepath.IsAbs(d) && !strings.ContainsRune(d, 0)
}

// Arm starts watching dir (idempotent). Its first check runs initial-delay
// later. reason is shown in status ("--directory", "mcp.tools.changed", …).
func (e *Engine) Arm(d, reason string) error {
	if !validDir(d) {
		return fmt.Errorf("directory %q is not an absolute path", d)
	}
	e.mu.Lock()
	if e.ctx == nil {
		if e.pending != nil {
			e.pending[d] = reason
		}
		e.mu.Unlock()
		return nil
	}
	ev := e.armLocked(d, reason)
	e.mu.Unlock()
	e.publish(ev)
	return nil
}

// armLocked arms d if it is not armed; it returns the "armed" event, or a
// zero Event when d was armed already.
func (e *Engine) armLocked(path, reason string) Event {
	if _, ok := e.dirs[path]; ok || e.ctx.Err() != nil {
		return Event{}
	}
	now := time.Now()
	ctx, cancel := context.WithCancel(e.ctx)
	d := &dir{
		path:         path,
		armedBy:      reason,
		armedAt:      now,
		cancel:       cancel,
		wake:         make(chan struct{}, 1),
		results:      make(chan connectResult),
		probes:       make(chan probeResult),
		restarts:     make(chan string),
		urls:         map[string]string{},
		servers:      map[string]*server{},
		kinds:        map[string]string{},
		lastActivity: now,
		next:         now.Add(e.wakeDelay()),
	}
	e.dirs[path] = d
	e.metrics.ArmedDirectories.Set(float64(len(e.dirs)))
	e.log.Debug("armed directory", "url", e.url, "directory", path, "reason", reason)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.loop(ctx, d)
	}()
	return Event{Time: now, Type: EventArmed, Directory: path, Reason: reason}
}

// Disarm stops watching dir and forgets it: no request for it is made
// until it is armed again.
func (e *Engine) Disarm(path, reason string) {
	e.mu.Lock()
	ev := e.disarmLocked(path, reason)
	e.mu.Unlock()
	e.publish(ev)
}

func (e *Engine) disarmLocked(path, reason string) Event {
	delete(e.pending, path)
	d, ok := e.dirs[path]
	if !ok {
		return Event{}
	}
	d.cancel()
	delete(e.dirs, path)
	e.metrics.ArmedDirectories.Set(float64(len(e.dirs)))
	e.log.Debug("disarmed directory", "url", e.url, "directory", path, "reason", reason)
	return Event{Time: time.Now(), Type: EventDisarmed, Directory: path, Reason: reason}
}

// DisarmAll forgets every directory (global.disposed). The engine keeps
// running and arms again on later events.
func (e *Engine) DisarmAll(reason string) {
	e.mu.Lock()
	var evs []Event
	for _, p := range opencode.Names(e.dirs) {
		evs = append(evs, e.disarmLocked(p, reason))
	}
	e.mu.Unlock()
	e.publish(evs...)
}

// HandleEvent applies one OpenCode event: arming, waking, disposing.
func (e *Engine) HandleEvent(ev opencode.Event) {
	switch ev.Kind {
	case opencode.KindServerFailed:
		e.toolsChanged(ev.Directory, ev.Server)
	case opencode.KindInstanceGone:
		e.Disarm(ev.Directory, ev.Type)
	case opencode.KindAllGone:
		e.DisarmAll(ev.Type)
	case opencode.KindActivity:
		e.activity(ev.Directory, ev.Type)
	}
	// Everything else, project.* events included, arms nothing: those name
	// directories nobody may be using, and reading their status would
	// start their MCP servers.
}

// armOrWake arms path for reason if it is not armed; if it is, it calls
// wake on it with Engine.mu held. Events for directories that are not
// absolute paths ("global") are ignored.
func (e *Engine) armOrWake(path, reason string, wake func(*dir)) {
	if !validDir(path) {
		return
	}
	e.mu.Lock()
	if e.ctx == nil {
		e.mu.Unlock()
		return
	}
	if d, ok := e.dirs[path]; ok {
		wake(d)
		e.mu.Unlock()
		return
	}
	ev := e.armLocked(path, reason)
	e.mu.Unlock()
	e.publish(ev)
}

// toolsChanged arms dir, or wakes it initial-delay from now unless the
// server named is in the slow tier.
func (e *Engine) toolsChanged(path, serverName string) {
	e.armOrWake(path, opencode.EventToolsChanged, func(d *dir) {
		if s := d.servers[serverName]; serverName != "" && s != nil && s.tier() != TierFast {
			return // a permanently broken server must not keep its directory busy
		}
		d.wakeBy(time.Now().Add(e.wakeDelay()))
	})
}

// activity arms dir, or wakes it at most once per idle interval.
func (e *Engine) activity(path, reason string) {
	e.armOrWake(path, reason, func(d *dir) {
		now := time.Now()
		if now.Sub(d.lastActivity) >= e.cfg.IdleInterval {
			d.lastActivity = now
			d.wakeBy(now.Add(e.wakeDelay()))
		}
	})
}

// Resync wakes every armed directory initial-delay from now: after the
// event stream was re-subscribed, events may have been missed.
func (e *Engine) Resync() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.dirs {
		d.wakeBy(time.Now().Add(e.wakeDelay()))
	}
}

// NetworkChanged starts a fresh episode now for every failed server in
// every armed directory: a network change (an interface or route coming
// up, a VPN connecting) is the moment a server that was unreachable may
// answer, whatever its backoff says. Servers in other states are left
// alone (rule 1).
func (e *Engine) NetworkChanged() {
	e.mu.Lock()
	now := time.Now()
	n := 0
	for _, d := range e.dirs {
		woken := false
		for _, s := range d.servers {
			if s.status == opencode.StatusFailed && !s.connecting {
				s.reset()
				woken = true
				n++
			}
		}
		if woken {
			d.wakeBy(now)
		}
	}
	e.mu.Unlock()
	if n > 0 {
		e.log.Info("network changed; retrying failed MCP servers now", "url", e.url, "servers", n)
	}
	e.publish(Event{Time: now, Type: EventNetworkChanged, Attempt: n})
}

// ReconnectResult says what an explicit reconnect did.
type ReconnectResult struct {
	URL         string   `json:"url"`
	Directories []string `json:"directories"`
}

// Reconnect starts a fresh episode now for the named servers (all when
// names is empty) in path, arming it if needed, or in every armed directory
// when path is empty. Only servers OpenCode reports as failed are
// connected.
func (e *Engine) Reconnect(path string, names []string) (ReconnectResult, error) {
	res := ReconnectResult{URL: e.url, Directories: []string{}}
	if path != "" && !validDir(path) {
		return res, fmt.Errorf("directory %q is not an absolute path", path)
	}
	e.mu.Lock()
	if e.ctx == nil {
		e.mu.Unlock()
		return res, errors.New("reconnect: engine not running")
	}
	var evs []Event
	targets := opencode.Names(e.dirs)
	if path != "" {
		evs = append(evs, e.armLocked(path, "reconnect"))
		targets = []string{path}
	}
	now := time.Now()
	for _, p := range targets {
		d := e.dirs[p]
		if d == nil {
			continue
		}
		for name, s := range d.servers {
			if len(names) == 0 || contains(names, name) {
				s.reset()
			}
		}
		d.wakeBy(now)
		res.Directories = append(res.Directories, p)
	}
	e.mu.Unlock()
	e.publish(evs...)
	return res, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SetStream records the event stream's state for Snapshot.
func (e *Engine) SetStream(connected bool, err error) {
	e.mu.Lock()
	now := time.Now()
	if connected {
		if !e.stream.Connected && !e.stream.Since.IsZero() {
			e.stream.Reconnects++
		}
		e.stream.Connected, e.stream.Since, e.stream.LastError = true, now, ""
	} else {
		if e.stream.Connected || e.stream.Since.IsZero() {
			e.stream.Since = now
		}
		e.stream.Connected = false
		if err != nil {
			e.stream.LastError = err.Error()
		}
	}
	e.mu.Unlock()
}

// Snapshot copies the engine's state.
func (e *Engine) Snapshot() Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Snapshot{URL: e.url, Stream: e.stream, Directories: []DirSnapshot{}}
	for _, p := range opencode.Names(e.dirs) {
		s.Directories = append(s.Directories, e.dirs[p].snapshot())
	}
	return s
}

// slotWait is how long a server waits for a connect slot, jittered ±50%.
func (e *Engine) slotWait() time.Duration {
	f := 0.5 + rand.Float64()
	return time.Duration(float64(e.cfg.SlotWait) * f)
}

// wakeDelay is the delay from an arming or a wake to the check it causes:
// initial-delay, jittered downwards only. Jitter spreads the checks of many
// directories woken together (a re-subscribed event stream), and never
// makes a woken check later than initial-delay, so the time from a crash
// event to its connect stays within initial-delay plus the call itself.
func (e *Engine) wakeDelay() time.Duration {
	p := e.cfg.Backoff
	return time.Duration(float64(p.Initial) * (1 - p.Jitter*rand.Float64()))
}

// idleAt is when an idle re-check after now is due: the idle interval,
// jittered like every other delay (without it, directories armed together
// check together forever), then rounded up to a whole grid step. The
// rounding batches the checks of many directories into one wake-up of the
// process: on a small VM, a status read that wakes an idle process costs
// far more CPU than one made while it is awake, and idle checks are what
// the daemon mostly does (BENCHMARKS.md: half the idle CPU at scale).
func (e *Engine) idleAt(now time.Time) time.Time {
	return e.onGrid(now.Add(e.cfg.Backoff.Jittered(e.cfg.IdleInterval)))
}

// onGrid rounds t up to the idle grid: one second, or a tenth of the idle
// interval when that is shorter.
func (e *Engine) onGrid(t time.Time) time.Time {
	grid := min(time.Second, e.cfg.IdleInterval/10)
	if grid <= 0 {
		return t
	}
	if r := t.Truncate(grid); !r.Equal(t) {
		return r.Add(grid)
	}
	return t
}
