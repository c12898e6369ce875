// Package reconnect is the engine that keeps one OpenCode server's MCP
// servers connected. It is a small level-triggered controller in the manner
// of controller-runtime: for each armed project directory one check at a
// time, run by the engine's work queue when the directory is due
// (queue.go), reads GET /mcp and reconciles (check.go, reconcile.go),
// deciding from that fresh read alone which failed servers to connect
// and when to look again. Everything else (OpenCode's events, probes of
// remote endpoints, endpoint restarts, network changes, free connect
// slots, the user's reconnect) only marks a directory due, now or at a
// time, with a reason; it never connects by itself. Each server's retry
// schedule is a backoff.Episode, so every cause of a connect is charged
// to one limiter.
package reconnect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/probe"
)

// OpenCode is what the engine needs from an OpenCode server, whatever its
// generation.
type OpenCode interface {
	MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error)
	Connect(ctx context.Context, dir, name string) error
	MCPConfig(ctx context.Context, dir string) (map[string]opencode.MCPEntry, error)
}

// maxChecks bounds the checks of one engine that run at once: as many as
// the OpenCode client's connections for reads (opencode.Client), which
// would queue the rest anyway.
const maxChecks = 32

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
	// StableAfter is how long a server must stay connected after its last
	// attempt before its episode is forgotten (default 60s). One that
	// fails again sooner continues its episode: crash loops back off and
	// reach the slow tier, as the kubelet's do.
	StableAfter time.Duration
}

// DefaultConfig has the SPEC's defaults.
var DefaultConfig = Config{
	Backoff:       backoff.Default,
	IdleInterval:  30 * time.Second,
	MaxConcurrent: 2,
	StableAfter:   60 * time.Second,
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
	case c.StableAfter < 0:
		return errors.New("--stable-after must not be negative")
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
	budget  *Share // this engine's share of the daemon's connect budget
	onEvent func(Event)
	current func() string
	about   func() *OpenCodeInfo
	hub     *probe.Hub // endpoint probes and watches shared by every directory (nil: none)
	q       *queue     // the armed directories' turns (guarded by mu)
	// slotLine holds the directories waiting for a budget slot, in the
	// order they found none (slotFreed); woken counts the directories a
	// slot of each kind woke whose turn is not over. Guarded by mu.
	slotLine []*dir
	woken    [2]int

	mu sync.Mutex
	// procs answers the successor question of a dead child (nil: no
	// process view).
	procs ProcessView
	// ctx is Run's, nil before Run: a directory armed before Run waits
	// in the queue for it; none is armed once it ended.
	ctx    context.Context
	dirs   map[string]*dir
	gone   map[string]time.Time // instances that went away lately (pruned)
	stream StreamState
	// bootedList is the server's list of booted locations, shared by the
	// checks of one second (locations.go).
	bootedList bootedCache
	// localsGen counts changes of the armed directories' local servers
	// (processes.go).
	localsGen uint64
	// configs holds one copy of each distinct directory config.
	configs configs
	// named are the directories the user named (--directory): whatever
	// armed one, or arms it again after a disposal, it is the user's.
	named map[string]bool
	wg    sync.WaitGroup
}

// Options are the engine's collaborators. Zero fields get harmless defaults.
type Options struct {
	// URL names the OpenCode server in snapshots, events and logs.
	URL string
	// CurrentURL, when set, is where the server is now (the OpenCode 2
	// service may move), shown in snapshots instead of URL.
	CurrentURL func() string
	// Log receives the engine's log lines.
	Log *slog.Logger
	// Metrics counts what the engine does.
	Metrics *metrics.Metrics
	// Budget is shared by every engine of one daemon (default: a budget of
	// Config.MaxConcurrent for this engine alone).
	Budget *Budget
	// OnEvent receives every event; it must not block.
	OnEvent func(Event)
	// Prober probes failed remote servers' endpoints and watches connected
	// ones for restarts; nil turns both off.
	Prober *probe.Prober
	// About, when set, says what is known of the OpenCode server, for
	// snapshots (nil: not detected yet). It must not block for long.
	About func() *OpenCodeInfo
}

// New returns an engine; call Run to start it.
func New(cfg Config, oc OpenCode, o Options) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, oc: oc, url: o.URL, current: o.CurrentURL, about: o.About, onEvent: o.OnEvent,
		log: cmp.Or(o.Log, slog.New(slog.DiscardHandler)), metrics: cmp.Or(o.Metrics, metrics.New()),
		budget: cmp.Or(o.Budget, NewBudget(cfg.MaxConcurrent)).Share(),
		dirs:   map[string]*dir{}, gone: map[string]time.Time{}, named: map[string]bool{}}
	e.q = &queue{state: map[string]uint8{}, kick: make(chan struct{}, 1)}
	e.q.cond.L = &e.mu
	if e.onEvent == nil {
		e.onEvent = func(Event) {}
	}
	if o.Prober != nil {
		e.hub = probe.NewHub(o.Prober, e.metrics.Probes.Inc)
	}
	return e, nil
}

// Run runs the engine until ctx ends, then stops every directory and
// waits for all it started. Directories armed before Run are checked
// from then on.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.ctx != nil {
		e.mu.Unlock()
		return errors.New("reconnect: engine already running")
	}
	e.ctx = ctx
	e.wg.Go(func() { e.delays(ctx) })
	for range maxChecks {
		e.wg.Go(e.worker)
	}
	e.mu.Unlock()

	<-ctx.Done()

	e.mu.Lock()
	for _, d := range e.dirs {
		e.stopLocked(d)
	}
	e.dirs, e.slotLine, e.woken = map[string]*dir{}, nil, [2]int{}
	e.budget.Waiting(0)
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
// engine may arm.
func validDir(d string) bool {
	return d != "" && filepath.IsAbs(d) && !strings.ContainsRune(d, 0)
}

// ArmedByFlag is the reason of directories the user named (--directory):
// they stay armed through OpenCode restarts (see restarted).
const ArmedByFlag = "--directory"

// armedByReconnect is the reason of a directory armed by the user's
// reconnect: read even when OpenCode has not booted it (the user asked).
const armedByReconnect = "reconnect"

// Arm starts watching dir (idempotent). Its first check runs initial-delay
// later. reason is shown in status (ArmedByFlag, "mcp.tools.changed", …).
func (e *Engine) Arm(d, reason string) error {
	if !validDir(d) {
		return fmt.Errorf("directory %q is not an absolute path", d)
	}
	e.mu.Lock()
	if reason == ArmedByFlag {
		// Named, also when in use already (a client armed it): the
		// user's own from now on (dir.armedBy), kept through OpenCode's
		// restarts and read whether or not OpenCode has it booted.
		e.named[d] = true
	}
	ev := e.armLocked(d, reason, e.wakeDelay())
	e.mu.Unlock()
	e.publish(ev)
	return nil
}

// armLocked arms path if it is not armed, its first check first later
// (mostly wakeDelay); it returns the "armed" event, or a zero Event when
// path was armed already.
func (e *Engine) armLocked(path, reason string, first time.Duration) Event {
	if _, ok := e.dirs[path]; ok || e.ctx != nil && e.ctx.Err() != nil {
		return Event{}
	}
	now := time.Now()
	ctx, cancel := context.WithCancel(context.Background()) // until disarmed (Run's end disarms all)
	d := newDir(path, reason, now, cancel)
	d.ctx, d.q = ctx, e.q
	if first == 0 {
		d.lastAtOnce = now
	}
	d.wakeBy(now.Add(first))
	e.dirs[path] = d
	e.metrics.ArmedDirectories.Set(len(e.dirs))
	e.log.Debug("armed directory", "url", e.url, "directory", path, "reason", reason)
	return Event{Time: now, Type: EventArmed, Directory: path, Reason: reason}
}

// stopLocked disarms d: its context ends (a check or connect under way
// ends with it, and sends nothing more), it leaves the queue, and its
// endpoint probes and watches end. Caller holds Engine.mu.
func (e *Engine) stopLocked(d *dir) {
	d.cancel()
	if d.slotWoken != 0 {
		e.unwake(d)
		e.slotFreed() // the slot it was woken for goes to the next
	} else if d.slotKinds != 0 {
		e.tellWaiting() // it leaves the line (inLine): the budget's too
	}
	e.q.forget(d.path)
	for _, s := range d.servers {
		s.endWatch()
		s.stopProbes()
	}
}

func (e *Engine) disarmLocked(path, reason string) Event {
	d, ok := e.dirs[path]
	if !ok {
		return Event{}
	}
	e.stopLocked(d)
	delete(e.dirs, path)
	if !sameLocals(d.config, nil) {
		e.localsGen++ // it had local servers
	}
	e.metrics.ArmedDirectories.Set(len(e.dirs))
	e.log.Debug("disarmed directory", "url", e.url, "directory", path, "reason", reason)
	return Event{Time: time.Now(), Type: EventDisarmed, Directory: path, Reason: reason}
}

// restarted forgets every directory after OpenCode restarted (or refused
// connections: it is restarting): nobody may use them any more, and
// reading one would create its instance and spawn its MCP servers in the
// new process. Those the user named with --directory are in use by
// definition: they are armed afresh (new episodes, config read again, as
// the new process knows nothing of the old one's), their first check
// first later. It returns how many directories were forgotten.
func (e *Engine) restarted(reason string, first time.Duration) int {
	e.mu.Lock()
	var evs []Event
	forgotten := 0
	for _, p := range opencode.Names(e.dirs) {
		evs = append(evs, e.disarmLocked(p, reason))
		if e.named[p] {
			evs = append(evs, e.armLocked(p, ArmedByFlag, first))
		} else {
			forgotten++
		}
	}
	e.mu.Unlock()
	e.publish(evs...)
	return forgotten
}

// StreamConnected tells the engine that the event stream was subscribed
// again after a drop: events may have been missed, so every armed
// directory is re-checked once (after a hiccup all of them; after an
// OpenCode restart, which OpenCodeReplaced handled before the stream came
// back, those named with --directory).
func (e *Engine) StreamConnected() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.dirs {
		d.wakeBy(time.Now().Add(e.wakeDelay()))
	}
}

// OpenCodeReplaced tells the engine that another OpenCode process answers
// than before (it answers again after refusing connections, or reports
// another pid, version or generation): every armed directory but those
// named with --directory is forgotten, since reading one would create an
// instance (and spawn its MCP servers) nobody may use any more; they re-arm
// on the next activity. Named ones start afresh, checked initial-delay
// later.
func (e *Engine) OpenCodeReplaced() {
	e.log.Info("opencode restarted; forgetting every directory until it is used again", "url", e.url)
	e.restarted("opencode restarted", e.wakeDelay())
}

// OpenCodeGone tells the engine that OpenCode refused a connection
// (whichever request saw it: the event stream, a status read, a connect):
// it is not running or is restarting (rule 8), so every directory is
// forgotten from this moment (but those named with --directory, which
// look again after an idle interval: OpenCode may stay down a while, and
// a refused read is no news, rule 9). The server (opencode.Server, the
// one owner of this fact) tells it once per absence, whichever request
// saw it: further refusals before OpenCode answers again are not told.
func (e *Engine) OpenCodeGone(err error) {
	if n := e.restarted("opencode refused connections", e.cfg.Backoff.Jittered(e.cfg.IdleInterval)); n > 0 {
		e.log.Info("opencode refused the connection; forgetting every directory until it is used again", "url", e.url, "directories", n, "err", err)
	}
}

// NetworkChanged tells the engine the way out of the machine moved, or
// the machine woke from sleep (netwatch: a default route came, went or
// moved, as when a VPN connects, or an address one uses went away). A
// failed server may answer now; a connected remote server's session may
// be dead while OpenCode still says connected (a VPN that resets every
// live socket, a sleep the remote server dropped the session in), and
// OpenCode finds out only when a tool call fails. So every armed
// directory's next read decides, server by server (trigNetwork,
// trigRenew, reconcile): a failed server is connected, a connected remote
// one connected again for a fresh session; connected local servers and
// those left to the user (disabled, needs_auth) are left alone. Each
// attempt is charged to the server's episode as a network-triggered one:
// at once in the fast episode, at most one per server per max-delay, none
// once stopped. A directory is due as soon as one of the servers it knows
// may have one: a failed server's repair at once, a renewal initial-delay
// later, so that the repairs the change asks for wait for a budget slot
// (slotLine) before any renewal (a known failure comes before a session that
// may be dead). Every endpoint watch is dialled anew: a held connection
// may be dead without a word, and a watch over it would miss the server's
// next restart.
func (e *Engine) NetworkChanged() { e.networkChanged(trigNetwork | trigRenew) }

// InterfacesChanged tells the engine the machine's network changed beside
// a way out that stayed (netwatch: an interface came or went, as a
// container bridge does): a failed server may answer now, and is checked
// as NetworkChanged checks it; a held connection is not touched by such a
// change, so connected servers and endpoint watches are left alone.
func (e *Engine) InterfacesChanged() { e.networkChanged(trigNetwork) }

func (e *Engine) networkChanged(trig int) {
	renew := trig&trigRenew != 0
	if e.hub != nil && renew {
		e.hub.Renew()
	}
	e.mu.Lock()
	now := time.Now()
	n := 0
	for _, d := range e.dirs {
		d.netTrig |= trig
		var first time.Time // when the first of its servers may try
		for name, s := range d.servers {
			// A change may cause an attempt for a server the last read
			// showed failed or, when it may renew, for a remote server
			// OpenCode holds a session of, or is making one (pending).
			remote := d.config.remote(name) != ""
			if s.status != opencode.StatusFailed && (!renew || !remote || s.status != opencode.StatusConnected && s.status != opencode.StatusPending) {
				continue
			}
			if at, ok := s.ep.NextAllowed(e.cfg.Backoff, backoff.Network); ok {
				if s.status != opencode.StatusFailed {
					at = backoff.Later(at, now.Add(e.wakeDelay())) // a renewal
				}
				first = earlier(first, backoff.Later(at, now))
			}
		}
		if !first.IsZero() {
			n++
			d.wakeBy(first)
		}
	}
	e.mu.Unlock()
	if n > 0 {
		e.log.Info("network changed; checking MCP servers now", "url", e.url, "directories", n)
	}
	e.publish(Event{Time: now, Type: EventNetworkChanged, Attempt: n})
}

// ReconnectResult says what an explicit reconnect did.
type ReconnectResult struct {
	URL         string   `json:"url"`
	Directories []string `json:"directories"`
}

// Reconnect starts a fresh episode now for the named servers (all when
// names is empty) in path, arming it if needed, or in every armed
// directory when path is empty. The check it causes connects only what a
// fresh read shows failed.
func (e *Engine) Reconnect(path string, names []string) (ReconnectResult, error) {
	res := ReconnectResult{URL: e.url, Directories: []string{}}
	if path != "" && !validDir(path) {
		return res, fmt.Errorf("directory %q is not an absolute path", path)
	}
	e.mu.Lock()
	var evs []Event
	targets := opencode.Names(e.dirs)
	if path != "" {
		evs = append(evs, e.armLocked(path, armedByReconnect, e.wakeDelay()))
		targets = []string{path}
	}
	now := time.Now()
	for _, p := range targets {
		d := e.dirs[p]
		if d == nil {
			continue
		}
		for name, s := range d.servers {
			if len(names) == 0 || slices.Contains(names, name) {
				s.forget()
			}
		}
		d.wakeBy(now)
		res.Directories = append(res.Directories, p)
	}
	e.mu.Unlock()
	e.publish(evs...)
	return res, nil
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

// Stream is the state of the event stream alone: what readiness asks at
// every probe and scrape, without asking About.
func (e *Engine) Stream() StreamState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stream
}

// Summary is what the engine knows but the directories (Directories
// nil; Directories yields them).
func (e *Engine) Summary() Snapshot {
	var about *OpenCodeInfo
	if e.about != nil {
		about = e.about() // outside the lock: it may ask the server
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return Snapshot{URL: e.CurrentURL(), OpenCode: about, Stream: e.stream}
}

// Directories yields a copy of each armed directory's state, in order of
// path, one at a time: a thousand directories' status is written out
// without a copy of all of them at once.
func (e *Engine) Directories() iter.Seq[DirSnapshot] {
	return func(yield func(DirSnapshot) bool) {
		e.mu.Lock()
		paths := opencode.Names(e.dirs)
		e.mu.Unlock()
		for _, p := range paths {
			e.mu.Lock()
			d := e.dirs[p]
			var ds DirSnapshot
			if d != nil {
				ds = d.snapshot(e.cfg.Backoff, e.named[p])
			}
			e.mu.Unlock()
			if d != nil && !yield(ds) {
				return
			}
		}
	}
}

// wakeDelay is the delay from an arming or a wake to the check it causes:
// initial-delay, jittered downwards only. Jitter spreads the checks of many
// directories woken together (a re-subscribed event stream), and never
// makes a woken check later than initial-delay.
func (e *Engine) wakeDelay() time.Duration {
	p := e.cfg.Backoff
	return time.Duration(float64(p.Initial) * (1 - p.Jitter*rand.Float64()))
}

// idleAt is when an idle re-check after now is due: the idle interval,
// jittered like every other delay (without it, directories armed together
// check together forever), then rounded up to a whole grid step. The
// rounding batches the checks of many directories into one wake-up of the
// process: on a small VM, a status read that wakes an idle process costs
// far more CPU than one made while it is awake (BENCHMARKS.md).
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
