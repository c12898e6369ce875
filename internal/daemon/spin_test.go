package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// countHandler counts records and cancels after limit of them.
type countHandler struct {
	n      atomic.Int64
	limit  int64
	cancel context.CancelFunc
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(context.Context, slog.Record) error {
	if h.n.Add(1) == h.limit {
		h.cancel()
	}
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// (The process view; the brief: "a busy loop when OpenCode exits".)
// Under run the view follows a fixed pid (run's child). Once that
// process has exited (or is a zombie the wrapper has not reaped yet),
// find returns the same pid at once, NewView fails at once, and run loops
// back with no wait at all: a core spun at 100 % (and a debug line per
// turn) until the daemon is stopped. The same holds under watch for a 2.x
// pid that is a zombie. Here: a pid that does not exist, a fake clock;
// the loop turns 10,000 times without the clock moving.
func TestProcessViewWaitsOnAnExitedOpenCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		h := &countHandler{limit: 10000, cancel: cancel}
		const gone = 1<<22 + 12345 // above any pid_max: never a process
		p := newProcWatch(nil, nil, gone, slog.New(h))
		start := time.Now()
		p.run(ctx)
		if n := h.n.Load(); n >= h.limit {
			t.Fatalf("%d attempts to view the exited OpenCode within %v: no wait between them", n, time.Since(start))
		}
	})
}
