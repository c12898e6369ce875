// Package daemon assembles the watcher: an OpenCode client, its event
// stream, the reconnect engine and the status API, run together until the
// context ends. It holds no policy of its own.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/announce"
	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/netwatch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/probe"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// Target is one OpenCode server the daemon watches.
type Target struct {
	// URL of the server.
	URL string
	// Username and Password for its basic auth.
	Username, Password string
	// Discover, when set, finds the server's URL and password anew (the
	// OpenCode 2 service file), at start and whenever it cannot be
	// reached; URL and Password are then only the first guess.
	Discover func(ctx context.Context) (url, password string, err error)
	// ServiceFile is the OpenCode 2 service file Discover reads.
	ServiceFile string
	// Directories armed from the start in this server (besides
	// Config.Directories, armed in every server).
	Directories []string
	// Transport replaces the HTTP transport (tests).
	Transport http.RoundTripper
	// PID, when set, is the OpenCode process (run's child), whose MCP
	// children the daemon watches; otherwise it is looked for on this
	// machine (processes.go).
	PID int

	// follow is set by ServiceServer: it is Discover, and says which
	// service file the server was found through.
	follow *serviceFollower
}

// Config is everything `watch` needs.
type Config struct {
	// Servers are the OpenCode servers to watch (at least one), each with
	// its own engine and event stream; they share one connect budget (it
	// protects the machine), one status API and one metrics registry.
	Servers []Target
	// Directories armed from the start, in every server.
	Directories []string
	// StatusAddr is where the status API listens; empty disables it.
	StatusAddr string
	// StatusPublic allows a non-loopback StatusAddr and any Host header.
	// Mutations still need the token.
	StatusPublic bool
	// Registry is where the daemon records itself (its status address and
	// token) while it runs; nil means registry.Default().
	Registry *registry.Registry
	// AllowDuplicate lets the daemon run although a running daemon of
	// this user already watches one of its servers (or follows the same
	// OpenCode 2 service file); without it Run refuses with a
	// *DuplicateError naming that daemon (see duplicate.go).
	AllowDuplicate bool
	// StatusAddrFallback listens on a free loopback port when StatusAddr
	// is taken (run: several wrapped TUIs each have a daemon), instead of
	// failing.
	StatusAddrFallback bool
	// Engine holds the reconnect tunables.
	Engine reconnect.Config
	// NoProbes turns off the reachability probes of failed remote servers.
	NoProbes bool
	// NoToasts turns off the toasts shown in an attached TUI.
	NoToasts bool
	// NoNetwatch turns off acting on network changes and wakes from sleep
	// (retrying failed servers, renewing remote sessions).
	NoNetwatch bool
	// NoProcessView turns off watching OpenCode's MCP processes: for tests
	// whose OpenCode is an in-process fake at a loopback address, where the
	// view would watch whatever real process listens on that port.
	NoProcessView bool
	// NetSource and Wake replace the network-change source and the wake
	// detector (tests); nil and the zero value are the machine's.
	NetSource netwatch.Source
	Wake      netwatch.WakeDetector
	// Version is reported by GET /status.
	Version string
	// Ready, if set, receives the status API's bound address once serving
	// and registered.
	Ready func(statusAddr string)
}

// probesPerSecond bounds reachability probes across every failed remote
// server the daemon watches.
const probesPerSecond = 20

// watched is one OpenCode server with everything that works for it alone.
// It is what the status API sees of the server (health.go): its engine,
// with what only the daemon knows.
type watched struct {
	*reconnect.Engine
	client *opencode.Server
	ann    *announce.Announcer
	m      *metrics.Metrics
	retry  backoff.Policy // the stream's reconnect backoff (zero: the default)
	procs  *procWatch     // the MCP process view of a local OpenCode
	follow *serviceFollower
	// unseen is set while OpenCode has not answered since the daemon
	// said it was waiting for it: the first subscription says it found it.
	unseen atomic.Bool
}

// Run watches the configured OpenCode servers until ctx ends. It returns
// early only for a configuration error, or refused credentials when it
// watches a single server (with several, one refusing the password must
// not stop the others: it is logged, once, and retried as any outage).
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if len(cfg.Servers) == 0 {
		return errors.New("no OpenCode server to watch")
	}
	dirs, err := PhysicalDirs(cfg.Directories)
	if err != nil {
		return err
	}
	if cfg.StatusAddr != "" {
		if err := statusapi.CheckAddr(cfg.StatusAddr, cfg.StatusPublic); err != nil {
			return err
		}
	}
	set := metrics.NewSet()
	broker := statusapi.NewBroker()
	budget := reconnect.NewBudget(cfg.Engine.MaxConcurrent)
	var prober *probe.Prober
	if !cfg.NoProbes {
		prober = probe.New(probesPerSecond)
	}
	var all []*watched
	var sources []statusapi.Source
	var urls []string
	var serviceFile string
	for _, sc := range cfg.Servers {
		w, err := newWatched(cfg, sc, set, broker, budget, prober, log)
		if err != nil {
			return err
		}
		own, err := PhysicalDirs(sc.Directories)
		if err != nil {
			return err
		}
		for _, d := range slices.Concat(dirs, own) {
			if err := w.Engine.Arm(d, reconnect.ArmedByFlag); err != nil {
				return err
			}
		}
		all = append(all, w)
		sources = append(sources, w)
		urls = append(urls, w.client.URL())
		serviceFile = cmp.Or(sc.ServiceFile, serviceFile)
	}

	if err := refuseDuplicate(cfg, urls, serviceFile); err != nil {
		return err
	}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	apiWait := func() error { return nil } // no status API: nothing to wait for
	var bound string
	var reg *registration
	if cfg.StatusAddr != "" {
		// Registered before anything talks to OpenCode (a detection can
		// take seconds): `run` must see a daemon that is starting for the
		// OpenCode 2 service, or it would start a second one. The token
		// exists only in memory and in the registry file, which only this
		// user can read: whoever can read it could have run the daemon's
		// commands anyway.
		token, err := registry.NewToken()
		if err != nil {
			return err
		}
		api := &statusapi.API{Sources: sources, Broker: broker, Metrics: set, Version: cfg.Version, Log: log,
			Token: token, Public: cfg.StatusPublic}
		bound, apiWait, err = api.Serve(ctx, cfg.StatusAddr)
		if err != nil && cfg.StatusAddrFallback && errors.Is(err, syscall.EADDRINUSE) {
			log.Info("status address taken; using a free port", "wanted", cfg.StatusAddr)
			bound, apiWait, err = api.Serve(ctx, "127.0.0.1:0")
		}
		if err != nil {
			return fmt.Errorf("%w (is another mcp-reconnect running? pass --status-addr)", err)
		}
		log.Info("status api listening", "addr", bound)
		if reg, err = register(cfg, urls, serviceFile, bound, token, log); err != nil {
			stop()
			_ = apiWait()
			return err
		}
		if reg.remove != nil {
			defer reg.remove()
		}
	}

	// One detection tells a wrong password apart from a server that is
	// not up yet: for a single server the first is fatal, the second is
	// waited out. With several, each is detected on its own (its stream
	// does it), so one that hangs or refuses the password delays nobody.
	if len(all) == 1 {
		if err := all[0].detect(ctx, log); err != nil {
			stop()
			_ = apiWait()
			return err
		}
	} else {
		for _, w := range all {
			wg.Go(func() { _ = w.detect(ctx, log) })
		}
	}
	if cfg.Ready != nil && cfg.StatusAddr != "" {
		cfg.Ready(bound)
	}

	for i, w := range all {
		wg.Go(func() { _ = w.Engine.Run(ctx) })
		wg.Go(func() { w.ann.Run(ctx) })
		if !cfg.NoProcessView {
			wg.Go(func() { w.procs.run(ctx) })
		}
		wg.Go(func() { streamLoop(ctx, w, broker, log, func(url string) { reg.setURL(i, url) }) })
		if w.follow != nil && w.follow.fallback != nil {
			wg.Go(func() { w.follow.watch(ctx) })
		}
	}
	wg.Go(func() { supervise(ctx, all, log) })
	if !cfg.NoNetwatch {
		wg.Go(func() { watchNetwork(ctx, cfg, all, log) })
	}
	wg.Wait()
	return apiWait()
}

// newWatched builds the client, engine and announcer of one server.
func newWatched(cfg Config, sc Target, set *metrics.Set, broker *statusapi.Broker,
	budget *reconnect.Budget, prober *probe.Prober, log *slog.Logger) (*watched, error) {
	client, err := opencode.NewServer(opencode.ServerOptions{URL: sc.URL, Discover: sc.Discover, Log: log,
		Client: opencode.Options{Username: sc.Username, Password: sc.Password, Transport: sc.Transport}})
	if err != nil {
		return nil, err
	}
	w := &watched{client: client, m: set.For(client.URL()), follow: sc.follow}
	if sc.Discover != nil {
		w.retry = followRetry // see service2.go
	}
	if w.follow != nil {
		w.follow.log = log // before anything runs: nothing reads it yet
	}
	w.ann = announce.New(client, log)
	w.ann.OnToast = func(_ opencode.Toast, err error) {
		if err == nil {
			w.m.Toasts.Inc()
		}
	}
	onEvent := broker.Publish
	if !cfg.NoToasts {
		onEvent = func(ev reconnect.Event) {
			broker.Publish(ev)
			w.ann.Notify(ev)
		}
	}
	// The label stays the first URL (metrics series must not come and go),
	// while status shows where the server is now (the OpenCode 2 service
	// may move to another port).
	opts := reconnect.Options{URL: client.URL(), CurrentURL: client.URL, Log: log, Metrics: w.m, OnEvent: onEvent, Budget: budget, Prober: prober,
		About: func() *reconnect.OpenCodeInfo { return about(client, procview.Unavailable) }}
	w.Engine, err = reconnect.New(cfg.Engine, client, opts)
	if err != nil {
		return nil, err
	}
	// Whichever request learns that OpenCode went away or came back as
	// another process (the stream, a status read, a connect, a detection)
	// tells the engine in the same step (rule 8).
	w.procs = newProcWatch(w.Engine, client, sc.PID, log)
	client.OnChange(func(ch opencode.Change, err error) {
		switch ch {
		case opencode.Gone:
			w.Engine.OpenCodeGone(err)
		case opencode.Replaced:
			w.Engine.OpenCodeReplaced()
			w.procs.replaced() // another process: look for it
		}
	})
	return w, nil
}

// about is what status shows of the server: its generation and version,
// and, for OpenCode 2, the routes it lacks for now (each answered 404: no
// such route); and that the daemon runs without a process view where
// there is none (noView, as procview.Unavailable).
func about(client *opencode.Server, noView error) *reconnect.OpenCodeInfo {
	gen, version := client.Generation()
	if gen == opencode.GenUnknown {
		return nil // nothing detected: asking now would detect
	}
	info := &reconnect.OpenCodeInfo{Generation: gen.String(), Version: version}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, c := range client.Capabilities(ctx) {
		if c.Missing != "" {
			info.RunsWithout = append(info.RunsWithout, c.Name+" ("+c.Missing+"): "+c.Without)
		}
	}
	if noView != nil {
		info.RunsWithout = append(info.RunsWithout, "processes ("+noView.Error()+
			"): a stdio server's crash is known only from OpenCode's status, no process is shown, found orphaned or signalled")
	}
	return info
}

// detect finds the server's generation (within 5 s) and says so; a
// refused password is the error.
func (w *watched) detect(ctx context.Context, log *slog.Logger) error {
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	gen, version, err := w.client.Detect(hctx)
	cancel()
	switch {
	case errors.Is(err, opencode.ErrUnauthorized):
		log.Error("opencode refused the credentials", "url", w.client.URL(), "err", err)
		return err
	case err != nil:
		w.unseen.Store(true)
		log.Warn("opencode not reachable yet; waiting for it", "url", w.client.URL(), "err", err)
	default:
		log.Info("watching opencode", "url", w.client.URL(), "generation", gen.String(), "version", version)
	}
	return nil
}

// PhysicalDirs makes every directory its PhysicalDir: those it could,
// and an error naming each it could not.
func PhysicalDirs(dirs []string) ([]string, error) {
	out := make([]string, 0, len(dirs))
	var errs []error
	for _, d := range dirs {
		p, err := PhysicalDir(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// PhysicalDir is the directory a TUI started in d would name: absolute,
// with every symlink resolved (its getcwd). OpenCode keys an instance (2.x:
// a location) by the exact string it is sent, so ~/code -> /Volumes/work/code
// (or /tmp on macOS) sent as given would boot a second instance, and a
// second MCP fleet, beside the TUI's. A directory that does not exist (yet)
// is only made absolute.
func PhysicalDir(d string) (string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("--directory %q: %w", d, err)
	}
	p, err := filepath.EvalSymlinks(abs)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, fs.ErrNotExist):
		return abs, nil
	}
	return "", fmt.Errorf("--directory %q: %w", d, err)
}

// register records the daemon in the registry so `status` and `reconnect`
// find it (and its token) without being told the port. It fails only when
// a running daemon already watches one of its servers (a
// *DuplicateError; see registerUnique) and cfg.AllowDuplicate is not set.
// A registry that cannot be written leaves the API read-only in effect;
// the daemon still does its job.
func register(cfg Config, urls []string, serviceFile, bound, token string, log *slog.Logger) (*registration, error) {
	r := &registration{log: log, entry: registry.Entry{PID: os.Getpid(), URLs: urls, Service: serviceFile, StatusAddr: bound, Token: token,
		Version: cfg.Version, Started: time.Now()}}
	reg, err := cfg.registry()
	if err == nil {
		r.remove, err = registerUnique(reg, r.entry, cfg.AllowDuplicate)
	}
	if dup := (*DuplicateError)(nil); errors.As(err, &dup) {
		return nil, err
	}
	if err != nil {
		log.Warn("not registering this daemon; `mcp-reconnect reconnect` will not find it", "err", err)
		return r, nil
	}
	r.reg = reg
	log.Debug("registered", "dir", reg.Dir)
	return r, nil
}

// registry is where the daemon records itself: cfg.Registry, else the
// user's default registry.
func (cfg Config) registry() (*registry.Registry, error) {
	if cfg.Registry != nil {
		return cfg.Registry, nil
	}
	return registry.Default()
}

// registration is the daemon's registry entry while it runs. Nil-safe.
type registration struct {
	mu     sync.Mutex
	log    *slog.Logger
	reg    *registry.Registry
	entry  registry.Entry
	remove func()
}

// setURL records that the i-th server is now at url (the OpenCode 2
// service moved), so `reconnect --url` finds this daemon there.
func (r *registration) setURL(i int, url string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reg == nil || r.entry.URLs[i] == url { // i < len: the entry has one URL per server
		return
	}
	r.entry.URLs = slices.Replace(slices.Clone(r.entry.URLs), i, i+1, url)
	if _, err := r.reg.Register(r.entry); err != nil {
		r.log.Warn("could not update this daemon's registry entry", "err", err)
	}
}

// streamLoop feeds OpenCode's event stream (either generation) into the
// engine and keeps its state. A server found through an OpenCode 2
// service file may have its subscription ended by its follower (a
// service started while the 1.x fallback was watched): the server is
// then detected again, which tells every watcher it was replaced, and
// the next subscription is the service's.
func streamLoop(ctx context.Context, w *watched, broker *statusapi.Broker, log *slog.Logger, at func(url string)) {
	client, eng, m := w.client, w.Engine, w.m
	var wasUnauthorized bool
	for {
		sctx, cancel := context.WithCancel(ctx)
		if w.follow != nil {
			w.follow.setRestream(cancel)
		}
		_ = client.Stream(sctx, opencode.StreamOptions{
			Log:     log,
			Backoff: w.retry,
			OnConnect: func(c opencode.Connected) {
				at(client.URL())
				eng.SetStream(true, nil)
				broker.Publish(reconnect.Event{Time: time.Now(), Type: reconnect.EventStreamUp, URL: client.URL(), Attempt: c.N})
				wasUnauthorized = false
				if w.unseen.CompareAndSwap(true, false) {
					gen, version := client.Generation()
					log.Info("watching opencode", "url", client.URL(), "generation", gen.String(), "version", version)
				}
				if c.N > 1 {
					// Events may have been missed while the stream was down.
					// (An OpenCode restart reached the engine through
					// OnChange before the stream could subscribe again.)
					m.StreamReconnects.Inc()
					log.Info("event stream reconnected", "url", client.URL())
					eng.StreamConnected()
				}
			},
			OnDrop: func(err error) {
				eng.SetStream(false, err)
				ev := reconnect.Event{Time: time.Now(), Type: reconnect.EventStreamDown, URL: client.URL()}
				if err != nil {
					ev.Error = err.Error()
				}
				broker.Publish(ev)
				if errors.Is(err, opencode.ErrUnauthorized) {
					if !wasUnauthorized {
						log.Error("opencode refused the credentials", "err", err)
					}
					wasUnauthorized = true
					return
				}
				log.Debug("event stream dropped", "url", client.URL(), "err", err)
			},
		}, eng.HandleEvent)
		cancel()
		if ctx.Err() != nil {
			return
		}
		// The follower found a service: leave the fallback for it.
		eng.SetStream(false, errFollowService)
		broker.Publish(reconnect.Event{Time: time.Now(), Type: reconnect.EventStreamDown, URL: client.URL(), Error: errFollowService.Error()})
		dctx, dcancel := context.WithTimeout(ctx, 3*opencode.DetectTimeout)
		_, _, err := client.Detect(dctx)
		dcancel()
		if err != nil {
			log.Debug("the OpenCode 2 service found did not answer again; staying with the fallback", "err", err)
		}
	}
}

// errFollowService ends the fallback's event stream for a service.
var errFollowService = errors.New("an OpenCode 2 service started: following it instead of the fallback")
