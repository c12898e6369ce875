package announce

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type recorder struct {
	mu     sync.Mutex
	toasts []opencode.Toast
}

func (r *recorder) ShowToast(_ context.Context, t opencode.Toast) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.toasts = append(r.toasts, t)
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.toasts)
}

// At most one toast per server per minute; other servers are not held up.
func TestOneToastPerServerPerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		a := New(rec, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.Run(ctx) }()
		ev := reconnect.Event{Type: reconnect.EventReconnected, Directory: "/p/shop", Server: "github"}
		for range 5 {
			a.Notify(ev)
			synctest.Wait()
			time.Sleep(10 * time.Second)
		}
		if n := rec.count(); n != 1 {
			t.Fatalf("toasts in 50 s = %d, want 1", n)
		}
		a.Notify(reconnect.Event{Type: reconnect.EventGaveUp, Directory: "/p/shop", Server: "sentry"})
		a.Notify(reconnect.Event{Type: reconnect.EventAttempt, Directory: "/p/shop", Server: "x"}) // no toast
		synctest.Wait()
		time.Sleep(20 * time.Second)
		a.Notify(ev) // 70 s after the first
		synctest.Wait()
		if n := rec.count(); n != 3 {
			t.Fatalf("toasts = %d, want 3", n)
		}
		rec.mu.Lock()
		first, warn := rec.toasts[0], rec.toasts[1]
		rec.mu.Unlock()
		if first.Variant != "success" || first.Message != `MCP server "github" reconnected (shop)` || warn.Variant != "warning" {
			t.Fatalf("toasts = %+v", rec.toasts)
		}
		cancel()
		<-done
	})
}

// The last toast per server is kept only while it still holds a toast
// back: servers and directories that come and go (600 here) do not grow
// it.
func TestLastToastsArePruned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New(&recorder{}, nil)
		most := 0
		a.OnToast = func(opencode.Toast, error) { most = max(most, len(a.last)) } // on Run's goroutine
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.Run(ctx) }()
		for i := range 600 {
			a.Notify(reconnect.Event{Type: reconnect.EventReconnected, Directory: fmt.Sprintf("/p/%d", i), Server: "github"})
			synctest.Wait()
			time.Sleep(time.Second)
		}
		cancel()
		<-done
		// A minute of toasts, plus at most one minute not yet swept.
		if limit := int(2*MinGap/time.Second) + 1; most > limit {
			t.Fatalf("last held %d servers at once, want at most %d", most, limit)
		}
	})
}

// noToast is an OpenCode without a toast route (2.0.x).
type noToast struct{ calls int }

func (n *noToast) ShowToast(context.Context, opencode.Toast) error {
	n.calls++
	return opencode.ErrNoToast
}

// Without a toast route the announcer says so once, at debug level.
func TestNoToastRouteToldOnce(t *testing.T) {
	var logs bytes.Buffer
	n := &noToast{}
	a := New(n, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	for i := range 3 {
		a.announce(context.Background(), reconnect.Event{Type: reconnect.EventReconnected, Directory: "/p", Server: fmt.Sprint("s", i)})
	}
	if got := strings.Count(logs.String(), "toasts are unavailable"); got != 1 {
		t.Fatalf("told %d times, want once:\n%s", got, logs.String())
	}
	if n.calls != 3 {
		t.Fatalf("ShowToast calls = %d", n.calls)
	}
}
