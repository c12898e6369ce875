package reconnect

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// OpenCode 2's degrade rules (the v2 facts, section 4): a start stuck in
// pending, a status this daemon does not know.

// A server pending past OpenCode 2's startup and catalog timeouts plus
// 10 s is reported stuck, once: a log line, a needs_user event and a hint
// in status. It is never connected (a start is running).
func TestPendingPastItsTimeoutsIsReportedStuck(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"p": {}})
		fake.SetPending(24 * time.Hour)
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(60 * time.Second)
		if n := len(r.eventsOf(EventNeedsUserInput)); n != 0 {
			t.Fatalf("stuck reported after 59 s of pending: %+v", r.eventsOf(EventNeedsUserInput))
		}
		r.at(10 * time.Minute)
		evs := r.eventsOf(EventNeedsUserInput)
		if len(evs) != 1 || evs[0].Server != "p" || !strings.Contains(evs[0].Reason, "stuck") {
			t.Fatalf("needs_user events = %+v, want one saying p's start looks stuck", evs)
		}
		if s := r.server(dirA, "p"); s.Status != "pending" || !strings.Contains(s.Hint, "stuck") {
			t.Fatalf("snapshot = %+v, want a stuck hint", s)
		}
		if n := fake.Count(routeConnect, "", ""); n != 0 {
			t.Fatalf("%d connects of a pending server", n)
		}
	})
}

// A status the daemon does not know (one 2.x revision had
// "disconnected") is left alone and logged once, however often it is read.
func TestUnknownStatusIsLeftAloneAndLoggedOnce(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"odd": {Status: "disconnected"}})
		logs := &lineLog{}
		r := newRigWith(t, fake, noJitter(), Options{Log: slog.New(logs)})
		_ = r.eng.Arm(dirA, "test")
		r.at(10 * time.Minute)
		if n := fake.Count(routeConnect, "", ""); n != 0 {
			t.Fatalf("%d connects of a server in an unknown status", n)
		}
		if n := logs.count("does not know"); n != 1 {
			t.Fatalf("unknown status logged %d times in 10 minutes, want once", n)
		}
	})
}

// lineLog is a slog handler that keeps each message with its attributes.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (h *lineLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	h.lines = append(h.lines, line)
	return nil
}
func (h *lineLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineLog) WithGroup(string) slog.Handler      { return h }

func (h *lineLog) count(s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}
