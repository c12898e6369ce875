package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/launch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// DefaultStartTimeout bounds the wait for a launched OpenCode to answer.
const DefaultStartTimeout = 60 * time.Second

// Managed runs the command in plan and, when it is an OpenCode server,
// watches it with cfg (its Servers: the child alone) until it exits. It returns the exit code the wrapper
// should exit with: the child's own, or 128+N when signal N killed it, or 1
// when OpenCode never became healthy (err then says why).
// startTimeout (0: DefaultStartTimeout) bounds the wait for its health;
// with an error the code is never 0.
func Managed(ctx context.Context, plan *launch.Plan, cfg Config, startTimeout time.Duration, log *slog.Logger) (int, error) {
	if startTimeout <= 0 {
		startTimeout = DefaultStartTimeout
	}
	for attempt := 0; ; attempt++ {
		child, err := launch.Start(plan)
		if err != nil {
			return 1, err
		}
		log.Info("started", "command", plan.Args[0], "pid", child.PID(), "url", plan.URL, "generated_password", plan.GeneratedPassword)
		if plan.URL == "" {
			// Not a server (opencode mcp auth …, --version): just pass it through.
			return child.ExitCode(), nil
		}
		if _, err := opencode.New(plan.URL, opencode.Options{}); err != nil {
			child.Signal(syscall.SIGTERM)
			return cmp.Or(child.ExitCode(), 1), err
		}
		switch err := waitHealthy(ctx, child, plan, startTimeout); {
		case err == nil:
			// The child's credentials are the plan's: the user it was told
			// to expect, the password it was given.
			cfg.Servers = []Target{{URL: plan.URL, Username: plan.Username, Password: plan.Password, PID: child.PID()}}
			return watchChild(ctx, child, cfg, log), nil
		case errors.Is(err, errPortTaken) && attempt < maxPortRetries:
			// Another program took the port the wrapper chose before
			// OpenCode could listen on it: the user asked for no port, so
			// start again on another one, without a word on their screen.
			child.Signal(syscall.SIGTERM)
			<-child.Done()
			child.RestoreTerminal()
			log.Info("the chosen port was taken before opencode listened; starting it on another", "port", plan.Port)
			if err := plan.NewPort(); err != nil {
				return 1, err
			}
		case errors.Is(err, errChildExited) || errors.Is(err, errPortTaken):
			log.Info("opencode exited before it was healthy", "how", child.Describe())
			child.Signal(syscall.SIGTERM)
			return child.ExitCode(), nil
		default:
			child.Signal(syscall.SIGTERM)
			msg := err.Error()
			if tail := child.Tail.Lines(20); tail != "" {
				msg += "; its last output:\n" + tail
			}
			return cmp.Or(child.ExitCode(), 1), errors.New(msg)
		}
	}
}

// watchChild watches the healthy child with cfg until it exits, and
// returns its exit code.
func watchChild(ctx context.Context, child *launch.Child, cfg Config, log *slog.Logger) int {
	dctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := Run(dctx, cfg, log); err != nil {
			// The child keeps running without its watcher: say so where the
			// user can find it, but never kill their session for it.
			log.Error("watcher stopped", "err", err)
		}
	})
	select {
	case <-child.Done():
	case <-ctx.Done():
		child.Signal(syscall.SIGTERM)
		<-child.Done()
	}
	log.Info("opencode ended; stopping", "how", child.Describe())
	stop()
	wg.Wait()
	return child.ExitCode()
}

var (
	errChildExited = errors.New("opencode exited")
	errPortTaken   = errors.New("the chosen port was taken")
)

// maxPortRetries bounds the restarts on another port.
const maxPortRetries = 2

// healthTimeout bounds each health probe: a request in the first half
// second after the port opens can hang (docs/opencode.md#the-first-half-second-after-the-port-opens).
const healthTimeout = 700 * time.Millisecond

// waitHealthy asks the plan's server which OpenCode it is (opencode.Detect,
// either generation: the plan's generation came from `--version`, which a
// wrapper script may not tell truly) with short timeouts until it
// answers, the child exits, or timeout passes. When the wrapper chose the
// port, it first checks that no other program holds it: `opencode serve`
// exits 1 then (after about 1.5 s), and the TUI waits forever without
// drawing (both measured with 1.18.34), while the probe would reach the
// other program.
func waitHealthy(ctx context.Context, child *launch.Child, plan *launch.Plan, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	opts := opencode.Options{Username: plan.Username, Password: plan.Password, Timeout: healthTimeout}
	for {
		if plan.PortChosen && launch.PortTaken(child.PID(), plan.Port) {
			return errPortTaken
		}
		_, _, _, err := opencode.Detect(ctx, plan.URL, opts)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("opencode at %s did not become healthy within %v (last: %v); raise --start-timeout if it is just slow", opencode.Redact(plan.URL), timeout, err)
		}
		select {
		case <-child.Done():
			if plan.PortChosen && child.ExitCode() != 0 && launch.PortTaken(child.PID(), plan.Port) {
				return errPortTaken
			}
			return errChildExited
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
