// Package announce tells the people looking when a server comes back or
// drops to the slow tier: OpenCode publishes nothing when a reconnect
// succeeds, so without this the user never learns their tools are back.
// It shows a toast in an attached TUI, at most one per server per minute.
package announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// MinGap is the least time between two toasts about one server.
const MinGap = time.Minute

// Toaster is what shows toasts; *opencode.Client implements it.
type Toaster interface {
	ShowToast(ctx context.Context, t opencode.Toast) error
}

// Announcer turns engine events into toasts.
type Announcer struct {
	t      Toaster
	log    *slog.Logger
	events chan reconnect.Event
	last   map[string]time.Time // directory + server → last toast, pruned after MinGap
	swept  time.Time            // when last was last pruned
	// noToastTold is set once the log said toasts are unavailable.
	noToastTold bool
	// OnToast, if set, is called after each toast attempt (metrics, tests).
	OnToast func(opencode.Toast, error)
}

// New returns an announcer; call Run, and feed it with Notify.
func New(t Toaster, log *slog.Logger) *Announcer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Announcer{t: t, log: log, events: make(chan reconnect.Event, 64), last: map[string]time.Time{}}
}

// Notify hands an event over without blocking; when the announcer is
// behind, the event is dropped (a toast is a courtesy, not a record).
func (a *Announcer) Notify(ev reconnect.Event) {
	if ev.Type != reconnect.EventReconnected && ev.Type != reconnect.EventGaveUp {
		return
	}
	select {
	case a.events <- ev:
	default:
	}
}

// Run shows toasts until ctx ends.
func (a *Announcer) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-a.events:
			a.announce(ctx, ev)
		}
	}
}

// Toast is the toast for an event, if it gets one.
func Toast(ev reconnect.Event) (opencode.Toast, bool) {
	where := filepath.Base(ev.Directory)
	switch ev.Type {
	case reconnect.EventReconnected:
		return opencode.Toast{Title: "mcp-reconnect", Variant: "success",
			Message: fmt.Sprintf("MCP server %q reconnected (%s)", ev.Server, where)}, true
	case reconnect.EventGaveUp:
		return opencode.Toast{Title: "mcp-reconnect", Variant: "warning",
			Message: fmt.Sprintf("MCP server %q is still failing (%s); retrying slowly. `mcp-reconnect status` for details", ev.Server, where)}, true
	}
	return opencode.Toast{}, false
}

func (a *Announcer) announce(ctx context.Context, ev reconnect.Event) {
	t, ok := Toast(ev)
	if !ok {
		return
	}
	key := ev.Directory + "\x00" + ev.Server
	now := time.Now()
	if last, seen := a.last[key]; seen && now.Sub(last) < MinGap {
		return
	}
	a.last[key] = now
	a.prune(now)
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := a.t.ShowToast(tctx, t)
	cancel()
	switch {
	case errors.Is(err, opencode.ErrNoToast):
		// OpenCode 2.0.x has no toast route: the event stays on /events,
		// in the log and in the metrics. Said once.
		if !a.noToastTold {
			a.noToastTold = true
			a.log.Debug("toasts are unavailable on this OpenCode; announcing through /events, the log and metrics")
		}
	case err != nil:
		// No TUI attached (opencode serve) is the common case: not news.
		a.log.Debug("toast not shown", "server", ev.Server, "err", err)
	}
	if a.OnToast != nil {
		a.OnToast(t, err)
	}
}

// prune forgets toasts older than MinGap (they hold nothing back any
// more), at most once per MinGap: directories and servers come and go, and
// the map keeps only those toasted in the last two minutes.
func (a *Announcer) prune(now time.Time) {
	if now.Sub(a.swept) < MinGap {
		return
	}
	a.swept = now
	maps.DeleteFunc(a.last, func(_ string, t time.Time) bool { return now.Sub(t) >= MinGap })
}
