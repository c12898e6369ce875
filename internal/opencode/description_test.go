package opencode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

const descHost = "opencode.desc:4096"

// serveV2 serves h inside the synctest bubble and returns a Server for it.
func serveV2(t *testing.T, h http.HandlerFunc) *Server {
	t.Helper()
	hosts := fakeopencode.NewHosts()
	t.Cleanup(hosts.Close)
	hosts.Serve(descHost, h)
	s, err := NewServer(ServerOptions{URL: "http://" + descHost, Client: Options{Password: "pw", Transport: hosts.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// counts counts requests by path.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) add(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[p]++
	return c.n[p]
}

func (c *counts) get(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[p]
}

const locationsDoc = `{"openapi":"3.1.0","paths":{"/api/info":{"get":{}},"/api/mcp":{"get":{}},"/api/event":{"get":{}},"/api/mcp/{name}/connect":{"post":{}},"/api/debug/location":{"get":{}}}}`

// One failed read of GET /openapi.json (a 503 or a timeout from a busy
// server) must not turn off the booted-locations check for the whole
// detection, which lasts as long as the event stream stays up (days):
// disposal-armed checks would boot disposed locations again. The list is
// "not yet" known while the description is unread, and the description
// is read again after a backoff step.
func TestDescriptionThatFailedIsReadAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen counts
		s := serveV2(t, func(w http.ResponseWriter, r *http.Request) {
			n := seen.add(r.URL.Path)
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/api/info":
				_, _ = w.Write([]byte(`{"version":"2.0.21","pid":4242,"urls":[]}`))
			case "/openapi.json":
				if n == 1 {
					http.Error(w, "busy", http.StatusServiceUnavailable) // once
					return
				}
				_, _ = w.Write([]byte(locationsDoc))
			case "/api/debug/location":
				_, _ = w.Write([]byte(`[{"directory":"/p"}]`))
			default:
				http.NotFound(w, r)
			}
		})
		ctx := context.Background()
		if gen, _, err := s.Detect(ctx); err != nil || gen != V2 {
			t.Fatalf("detect = %v, %v", gen, err)
		}
		_, known, err := s.BootedLocations(ctx) // the description read fails here
		wait, ok := RetryAfter(err)
		if !known || !errors.Is(err, ErrNotYet) || !ok || wait < time.Second || wait > 1200*time.Millisecond {
			t.Fatalf("with the description unread: known=%v, err=%v (wait %v); want ErrNotYet and about a second, never known=false (the engine would read, and boot, a disposed location)", known, err, wait)
		}
		if c := capability(s.Capabilities(ctx), CapLocations); c.Available() || !strings.Contains(c.Missing, "could not be read yet (GET /openapi.json answered 503") || !strings.Contains(c.Without, "wait") {
			t.Errorf("capability while unread: %+v", c)
		}
		if n := seen.get("/api/debug/location"); n != 0 {
			t.Fatalf("the list was asked %d times before the description said it exists", n)
		}
		if _, _, err := s.BootedLocations(ctx); !errors.Is(err, ErrNotYet) || seen.get("/openapi.json") != 1 {
			t.Fatalf("within the backoff step: err=%v, %d reads of the description; want not yet, one read", err, seen.get("/openapi.json"))
		}
		time.Sleep(wait)
		if s.Capabilities(ctx); seen.get("/openapi.json") != 1 {
			t.Fatal("Capabilities (asked by status) read the description again: it must not wait for it")
		}
		dirs, known, err := s.BootedLocations(ctx)
		if err != nil || !known || len(dirs) != 1 || dirs[0] != "/p" {
			t.Fatalf("after the backoff step: %v, %v, %v; want the list, read after the description answered", dirs, known, err)
		}
		if c := capability(s.Capabilities(ctx), CapLocations); c.Route != "GET /api/debug/location" || !c.FromDescription {
			t.Errorf("capability after the read: %+v", c)
		}
		if n := seen.get("/openapi.json"); n != 2 {
			t.Errorf("description read %d times, want 2", n)
		}
	})
}

func capability(caps []Capability, name string) Capability {
	for _, c := range caps {
		if c.Name == name {
			return c
		}
	}
	return Capability{}
}

// The description reads that keep failing are spaced by a growing,
// capped backoff: 1 s doubling to a minute, never a read per call.
func TestDescriptionReadsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen counts
		var at []time.Duration
		start := time.Now()
		s := serveV2(t, func(w http.ResponseWriter, r *http.Request) {
			seen.add(r.URL.Path)
			switch r.URL.Path {
			case "/api/info":
				_, _ = w.Write([]byte(`{"version":"2.0.21","pid":4242,"urls":[]}`))
			case "/openapi.json":
				at = append(at, time.Since(start))
				w.WriteHeader(http.StatusBadGateway)
			default:
				_, _ = w.Write([]byte(`{"location":{"directory":"/p"},"data":[{"name":"a","status":{"status":"connected"}}]}`))
			}
		})
		ctx := context.Background()
		for time.Since(start) < 4*time.Minute {
			if _, err := s.MCPStatus(ctx, "/p"); err != nil {
				t.Fatal(err) // the defaults serve meanwhile
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(at) < 7 || len(at) > 10 {
			t.Fatalf("%d reads of the description in 4 minutes at %v; want 1 s doubling to a minute", len(at), at)
		}
		for i := 1; i < len(at); i++ {
			// Jittered by ±20 %, seen by a call at most 100 ms later.
			base := min(time.Second<<(i-1), time.Minute)
			if gap := at[i] - at[i-1]; gap < base*8/10 || gap > base*12/10+100*time.Millisecond {
				t.Errorf("gap %d: %v; want about %v (reads at %v)", i, gap, base, at)
			}
		}
	})
}

// A status route that answered 404 without an OpenCode error tag (a
// proxy, a route being registered) is not dropped for the detection: it
// is left alone for a backoff step, then asked again, and serves again.
func TestStatusRouteThatAnswered404ComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen counts
		s := serveV2(t, func(w http.ResponseWriter, r *http.Request) {
			n := seen.add(r.URL.Path)
			switch r.URL.Path {
			case "/api/info":
				_, _ = w.Write([]byte(`{"version":"2.0.21","pid":4242,"urls":[]}`))
			case "/openapi.json":
				_, _ = w.Write([]byte(locationsDoc))
			case "/api/mcp":
				if n == 1 {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				_, _ = w.Write([]byte(`{"location":{"directory":"/p"},"data":[{"name":"a","status":{"status":"failed"}}]}`))
			default:
				http.NotFound(w, r)
			}
		})
		ctx := context.Background()
		if _, err := s.MCPStatus(ctx, "/p"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a 404 without a tag: %v", err)
		}
		if _, err := s.MCPStatus(ctx, "/p"); !errors.Is(err, ErrUnavailable) || seen.get("/api/mcp") != 1 {
			t.Fatalf("within the backoff step: %v after %d requests; want no request", err, seen.get("/api/mcp"))
		}
		if c := capability(s.Capabilities(ctx), CapStatus); c.Available() || !strings.Contains(c.Missing, "answered 404") || !strings.Contains(c.Missing, "asked again in") {
			t.Errorf("capability meanwhile: %+v", c)
		}
		time.Sleep(1200 * time.Millisecond)
		st, err := s.MCPStatus(ctx, "/p")
		if err != nil || st["a"].Status != StatusFailed {
			t.Fatalf("after the backoff step: %v, %v; want the route asked again", st, err)
		}
		if c := capability(s.Capabilities(ctx), CapStatus); c.Route != "GET /api/mcp" {
			t.Errorf("capability after: %+v", c)
		}
	})
}

// Where the description cannot be read at a later detection, the
// booted-locations route of this same process is used rather than
// waiting: its description, read before, is not read again.
func TestBootedLocationsRouteThatAnsweredBeforeServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var docDown atomic.Bool
		s := serveV2(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/api/info":
				_, _ = w.Write([]byte(`{"version":"2.0.21","pid":4242,"urls":[]}`))
			case "/openapi.json":
				if docDown.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = w.Write([]byte(locationsDoc))
			case "/api/debug/location":
				_, _ = w.Write([]byte(`[{"directory":"/p"}]`))
			}
		})
		ctx := context.Background()
		if _, known, err := s.BootedLocations(ctx); !known || err != nil {
			t.Fatal(known, err)
		}
		docDown.Store(true)
		if _, _, err := s.Detect(ctx); err != nil { // a re-subscribe
			t.Fatal(err)
		}
		dirs, known, err := s.BootedLocations(ctx)
		if !known || err != nil || len(dirs) != 1 {
			t.Fatalf("%v, %v, %v; want the list from the route that answered before", dirs, known, err)
		}
		if c := capability(s.Capabilities(ctx), CapLocations); c.Route != "GET /api/debug/location" || !c.FromDescription {
			t.Errorf("capability: %+v", c)
		}
	})
}

// v2events.go's session memory (which directory each session is in: the
// preview build's session.execution.* events carry no location) is the
// process's, not one detection's: every re-subscribe detects again and
// builds a new ClientV2, and 2.x ends a subscriber's stream when its
// 4096-frame queue overflows, i.e. during busy streaming replies.
// Another process (a new pid) forgets it.
func TestSessionMemorySurvivesAResubscribe(t *testing.T) {
	var pid atomic.Int32
	pid.Store(4242)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/info":
			_, _ = w.Write([]byte(fmt.Sprintf(`{"version":"2.0.21","pid":%d,"urls":[]}`, pid.Load())))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	s, err := NewServer(ServerOptions{URL: srv.URL, Client: Options{Password: "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	parse := func(frame string) Event {
		t.Helper()
		if _, _, err := s.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		v2 := s.v2
		s.mu.Unlock()
		ev, err := v2.feed().parse([]byte(frame))
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	parse(`{"type":"session.created","location":{"directory":"/p"},"data":{"sessionID":"ses_1"}}`)
	// The stream dropped while OpenCode stayed up: the re-subscribe detects again.
	if ev := parse(`{"type":"session.execution.started","data":{"sessionID":"ses_1"}}`); ev.Directory != "/p" {
		t.Fatalf("after a re-subscribe the execution event of a session seen in /p names directory %q: the session memory died with the old ClientV2", ev.Directory)
	}
	pid.Store(4243) // OpenCode replaced
	if ev := parse(`{"type":"session.execution.started","data":{"sessionID":"ses_1"}}`); ev.Directory != "" {
		t.Fatalf("another process's session is still placed in %q", ev.Directory)
	}
}
