package opencode_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// notReady answers as OpenCode 2's service does while it starts (facts
// §6): 503 {"code": code} with retry-after.
func notReady(code, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"` + code + `"}`))
	}
}

// "Not yet" is an error kind of its own, which is ErrUnavailable too (so
// every counter is kept) and carries the wait; a 503 without Retry-After
// is a plain unavailable answer.
func TestNotYetIsItsOwnErrorKind(t *testing.T) {
	for _, c := range []struct {
		retryAfter string
		notYet     bool
		wait       time.Duration
	}{
		{"1", true, time.Second},
		{"120", true, 2 * time.Minute},
		{"86400", true, 5 * time.Minute}, // capped
		{"", false, 0},
		{"soon", false, 0},
	} {
		srv := httptest.NewServer(notReady("service_starting", c.retryAfter))
		v, _ := opencode.NewV2(srv.URL, opencode.Options{Password: "pw"})
		_, err := v.MCPStatus(context.Background(), "/p")
		srv.Close()
		wait, ok := opencode.RetryAfter(err)
		if !errors.Is(err, opencode.ErrUnavailable) || errors.Is(err, opencode.ErrNotYet) != c.notYet || ok != c.notYet || wait != c.wait {
			t.Errorf("retry-after %q: err %v, not yet %v, wait %v; want not yet %v, wait %v", c.retryAfter, err, errors.Is(err, opencode.ErrNotYet), wait, c.notYet, c.wait)
		}
	}
}

// Detection of a service that is starting ends at the first "not yet",
// whichever probe heard it: 2.x's /api/info, or /global/health.
func TestDetectNotYet(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"2.1.2": notReady("service_starting", "1"),
		"at the second probe": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/global/health" {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNotFound)
		},
	} {
		srv := httptest.NewServer(h)
		gen, _, _, err := opencode.Detect(context.Background(), srv.URL, opencode.Options{Password: "pw"})
		srv.Close()
		if wait, ok := opencode.RetryAfter(err); gen != opencode.GenUnknown || !ok || wait != time.Second {
			t.Errorf("%s: %v, %v; want not yet, for a second", name, gen, err)
		}
	}
}

// A Server paces "not yet": detection is not tried again before the wait
// the last answer set, each wait that ends in another "not yet" is one
// backoff step longer (1 s doubling to a minute), and the first answer
// of a ready service ends it.
func TestServerPacesNotYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.New(nil)
		fake.SetService(fake2.ServiceStarting)
		tr, stop := fake.Serve()
		defer stop()
		s, _ := opencode.NewServer(opencode.ServerOptions{URL: fake2.URL, Client: opencode.Options{Password: fake2.DefaultPassword, Transport: tr}})
		ctx := context.Background()
		var waits []time.Duration
		for range 4 {
			_, _, err := s.Detect(ctx)
			wait, ok := opencode.RetryAfter(err)
			if !ok {
				t.Fatalf("detect: %v; want not yet", err)
			}
			before := fake.Count(fake2.RouteNotReady, "", "")
			if _, _, err := s.Detect(ctx); !errors.Is(err, opencode.ErrNotYet) || fake.Count(fake2.RouteNotReady, "", "") != before {
				t.Fatalf("a detection within the wait asked the server (%v)", err)
			}
			waits = append(waits, wait)
			time.Sleep(wait)
		}
		for i, w := range waits {
			step := time.Second << i
			if w < step*8/10 || w > step*12/10 {
				t.Fatalf("waits %v; want 1 s doubling (jittered)", waits)
			}
		}
		fake.SetService("")
		if gen, _, err := s.Detect(ctx); err != nil || gen != opencode.V2 {
			t.Fatalf("ready: %v, %v", gen, err)
		}
	})
}

// The event stream of a starting service re-subscribes no sooner than
// each answer's wait, not on its own 500 ms backoff.
func TestStreamWaitsOutNotYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.New(nil)
		fake.SetService(fake2.ServiceStarting)
		tr, stop := fake.Serve()
		defer stop()
		s, _ := opencode.NewServer(opencode.ServerOptions{URL: fake2.URL, Client: opencode.Options{Password: fake2.DefaultPassword, Transport: tr}})
		ctx, cancel := context.WithCancel(context.Background())
		var connected atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = s.Stream(ctx, opencode.StreamOptions{OnConnect: func(opencode.Connected) { connected.Add(1) }}, func(opencode.Event) {})
		}()
		time.Sleep(30 * time.Second)
		// Answers at about 0, 1, 3, 7, 15 s (the stream's own backoff
		// would have asked 7 times: 0.5 s doubling).
		if n := fake.Count(fake2.RouteNotReady, "", ""); n < 4 || n > 6 {
			t.Errorf("%d requests answered not yet in 30 s", n)
		}
		fake.SetService("")
		time.Sleep(40 * time.Second)
		if connected.Load() != 1 {
			t.Errorf("subscribed %d times once ready", connected.Load())
		}
		cancel()
		<-done
	})
}
