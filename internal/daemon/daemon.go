// Package daemon assembles the watcher: an OpenCode client, its event
// stream, the reconnect engine and the status API, run together until the
// context ends. It holds no policy of its own.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/announce"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/netwatch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/probe"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// Config is everything `watch` needs.
type Config struct {
	// URL of the OpenCode server.
	URL string
	// Username and Password for its basic auth.
	Username, Password string
	// Discover, when set, finds the server's URL and password anew (the
	// OpenCode 2 service file), at start and whenever it cannot be
	// reached; URL and Password are then only the first guess.
	Discover func(ctx context.Context) (url, password string, err error)
	// ServiceFile is the OpenCode 2 service file Discover reads, recorded
	// in the registry so `run` can tell the service is watched.
	ServiceFile string
	// Directories armed from the start.
	Directories []string
	// StatusAddr is where the status API listens; empty disables it.
	StatusAddr string
	// StatusPublic allows a non-loopback StatusAddr and any Host header.
	// Mutations still need the token.
	StatusPublic bool
	// Registry is where the daemon records itself (its status address and
	// token) while it runs; nil means registry.Default().
	Registry *registry.Registry
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
	// NoNetwatch turns off retrying failed servers on network changes.
	NoNetwatch bool
	// Version is reported by GET /status.
	Version string
	// Ready, if set, receives the status API's bound address once serving
	// and registered.
	Ready func(statusAddr string)
}

// probesPerSecond bounds reachability probes across every failed remote
// server the daemon watches.
const probesPerSecond = 20

// Run watches one OpenCode server until ctx ends. It returns early only for
// a configuration error or refused credentials.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	client, err := opencode.NewServer(opencode.ServerOptions{URL: cfg.URL, Discover: cfg.Discover, Log: log,
		Client: opencode.Options{Username: cfg.Username, Password: cfg.Password}})
	if err != nil {
		return err
	}
	dirs := make([]string, 0, len(cfg.Directories))
	for _, d := range cfg.Directories {
		abs, err := filepath.Abs(d)
		if err != nil {
			return fmt.Errorf("--directory %q: %w", d, err)
		}
		dirs = append(dirs, abs)
	}
	if cfg.StatusAddr != "" {
		if err := statusapi.CheckAddr(cfg.StatusAddr, cfg.StatusPublic); err != nil {
			return err
		}
	}

	// One detection tells a wrong password apart from a server that is
	// not up yet: the first is fatal, the second is waited out.
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	gen, version, err := client.Detect(hctx)
	cancel()
	switch {
	case errors.Is(err, opencode.ErrUnauthorized):
		return err
	case err != nil:
		log.Warn("opencode not reachable yet; waiting for it", "url", client.URL(), "err", err)
	default:
		log.Info("watching opencode", "url", client.URL(), "generation", gen.String(), "version", version)
	}

	m := metrics.New()
	broker := statusapi.NewBroker()
	ann := announce.New(client, log)
	ann.OnToast = func(_ opencode.Toast, err error) {
		if err == nil {
			m.Toasts.Inc()
		}
	}
	onEvent := broker.Publish
	if !cfg.NoToasts {
		onEvent = func(ev reconnect.Event) {
			broker.Publish(ev)
			ann.Notify(ev)
		}
	}
	opts := reconnect.Options{URL: client.URL(), Log: log, Metrics: m, OnEvent: onEvent}
	if !cfg.NoProbes {
		opts.Prober = probe.New(probesPerSecond)
	}
	eng, err := reconnect.New(cfg.Engine, client, opts)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := eng.Arm(d, "--directory"); err != nil {
			return err
		}
	}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var apiWait func() error
	if cfg.StatusAddr != "" {
		// The token exists only in memory and in the registry file, which
		// only this user can read: whoever can read it could have run the
		// daemon's commands anyway.
		token, err := registry.NewToken()
		if err != nil {
			return err
		}
		api := &statusapi.Server{Sources: []statusapi.Source{eng}, Broker: broker, Metrics: m, Version: cfg.Version, Log: log,
			Token: token, Public: cfg.StatusPublic}
		bound, wait, err := api.Serve(ctx, cfg.StatusAddr)
		if err != nil && cfg.StatusAddrFallback && errors.Is(err, syscall.EADDRINUSE) {
			log.Info("status address taken; using a free port", "wanted", cfg.StatusAddr)
			bound, wait, err = api.Serve(ctx, "127.0.0.1:0")
		}
		if err != nil {
			return fmt.Errorf("%w (is another mcp-reconnect running? pass --status-addr)", err)
		}
		apiWait = wait
		log.Info("status api listening", "addr", bound)
		unregister := register(cfg, client.URL(), bound, token, log)
		defer unregister()
		if cfg.Ready != nil {
			cfg.Ready(bound)
		}
	}

	wg.Add(3)
	go func() {
		defer wg.Done()
		_ = eng.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		ann.Run(ctx)
	}()
	if !cfg.NoNetwatch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := netwatch.Watch(ctx, netwatch.New(), eng.NetworkChanged); err != nil {
				log.Warn("not watching network changes", "err", err)
			}
		}()
	}
	go func() {
		defer wg.Done()
		streamLoop(ctx, client, eng, m, broker, log)
	}()
	wg.Wait()
	if apiWait != nil {
		return apiWait()
	}
	return nil
}

// register records the daemon in the registry so `status` and `reconnect`
// find it (and its token) without being told the port. A registry that
// cannot be written leaves the API read-only in effect; the daemon still
// does its job.
func register(cfg Config, url, bound, token string, log *slog.Logger) (unregister func()) {
	reg := cfg.Registry
	if reg == nil {
		var err error
		if reg, err = registry.Default(); err != nil {
			log.Warn("not registering this daemon; `mcp-reconnect reconnect` will not find it", "err", err)
			return func() {}
		}
	}
	remove, err := reg.Register(registry.Entry{PID: os.Getpid(), URLs: []string{url}, Service: cfg.ServiceFile, StatusAddr: bound, Token: token,
		Version: cfg.Version, Started: time.Now()})
	if err != nil {
		log.Warn("not registering this daemon; `mcp-reconnect reconnect` will not find it", "err", err)
		return func() {}
	}
	log.Debug("registered", "dir", reg.Dir)
	return remove
}

// streamLoop feeds OpenCode's event stream (either generation) into the
// engine and keeps its state.
func streamLoop(ctx context.Context, client *opencode.Server, eng *reconnect.Engine, m *metrics.Metrics, broker *statusapi.Broker, log *slog.Logger) {
	var wasUnauthorized bool
	_ = client.Stream(ctx, opencode.StreamOptions{
		Log: log,
		OnConnect: func(c opencode.Connected) {
			eng.SetStream(true, nil)
			broker.Publish(reconnect.Event{Time: time.Now(), Type: reconnect.EventStreamUp, URL: client.URL(), Attempt: c.N})
			wasUnauthorized = false
			if c.N > 1 {
				// Events may have been missed while the stream was down;
				// after refused connections OpenCode is a new process.
				m.StreamReconnects.Inc()
				log.Info("event stream reconnected", "url", client.URL(), "opencode_restarted", c.Restarted)
				eng.StreamConnected(c.Restarted)
			}
		},
		OnDrop: func(err error) {
			eng.SetStream(false, err)
			broker.Publish(reconnect.Event{Time: time.Now(), Type: reconnect.EventStreamDown, URL: client.URL(), Error: errString(err)})
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
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
