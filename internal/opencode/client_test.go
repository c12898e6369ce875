package opencode_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, url, password string) *opencode.Client {
	t.Helper()
	c, err := opencode.New(url, opencode.Options{Password: password, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestErrorsAreSorted(t *testing.T) {
	code, body := 200, ""
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, "s3cret-pw")
	set := func(c int, b string) { mu.Lock(); code, body = c, b; mu.Unlock() }

	set(401, "Unauthorized")
	_, err := c.MCPStatus(context.Background(), "/d")
	if !errors.Is(err, opencode.ErrUnauthorized) {
		t.Fatalf("401: err = %v, want ErrUnauthorized", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "answered 401") || !strings.Contains(msg, "OPENCODE_SERVER_PASSWORD") || strings.Contains(msg, "s3cret") {
		t.Fatalf("401 message = %q: want status and fix, never the password", msg)
	}
	set(404, `{"_tag":"McpServerNotFoundError"}`)
	if err := c.Connect(context.Background(), "/d", "x"); !errors.Is(err, opencode.ErrNotFound) {
		t.Fatalf("404: err = %v, want ErrNotFound", err)
	}
	for _, b := range []string{"[]", "null", "<html>", `{"a": 1}`, `{"a": {"status": 3}}`} {
		set(200, b)
		if _, err := c.MCPStatus(context.Background(), "/d"); !errors.Is(err, opencode.ErrUnavailable) {
			t.Fatalf("body %s: err = %v, want ErrUnavailable", b, err)
		}
	}
	set(503, "down")
	if _, err := c.MCPStatus(context.Background(), "/d"); !errors.Is(err, opencode.ErrUnavailable) {
		t.Fatalf("503: err = %v", err)
	}
	set(200, `{"`+strings.Repeat("x", 5<<20)+`": {"status": "failed"}}`)
	if _, err := c.MCPStatus(context.Background(), "/d"); !errors.Is(err, opencode.ErrUnavailable) || !strings.Contains(err.Error(), "4 MiB") {
		t.Fatalf("huge body: err = %v", err)
	}
	srv.Close()
	if _, err := c.MCPStatus(context.Background(), "/d"); !errors.Is(err, opencode.ErrUnavailable) {
		t.Fatalf("closed server: err = %v", err)
	}
}

func TestHungRequestTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, _ := opencode.New(srv.URL, opencode.Options{Timeout: 50 * time.Millisecond})
	_, err := c.MCPStatus(context.Background(), "/d")
	if !errors.Is(err, opencode.ErrUnavailable) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v, want a timeout that reads as unavailable", err)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "localhost:4096", "ftp://x", "http://user:pw@127.0.0.1:1"} {
		_, err := opencode.New(u, opencode.Options{})
		if err == nil {
			t.Errorf("New(%q) = nil error", u)
		} else if strings.Contains(err.Error(), ":pw@") {
			t.Errorf("New(%q) error leaks the password: %v", u, err)
		}
	}
}

func TestEscaping(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.EscapedPath()+" "+r.URL.Query().Get("directory"))
		_, _ = w.Write([]byte("true"))
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, "")
	if err := c.Connect(context.Background(), "/tmp/a b/ü&x=1", "srv/with space?#"); err != nil {
		t.Fatal(err)
	}
	want := "/mcp/srv%2Fwith%20space%3F%23/connect /tmp/a b/ü&x=1"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("request = %q, want %q", got, want)
	}
}

// Rule 10: a dropped stream and a silent stream both recover. The first
// subscription drops after one event, the second goes silent (no
// heartbeat), the third works; each must be followed by a re-subscribe.
func TestStreamRecoversFromDropAndSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		subs := 0
		var subTimes []time.Time
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			subs++
			n := subs
			subTimes = append(subTimes, time.Now())
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			_, _ = io.WriteString(w, "data: {\"payload\":{\"type\":\"server.connected\",\"properties\":{}}}\n\n")
			fl.Flush()
			switch n {
			case 1: // one event, then the connection drops
				_, _ = io.WriteString(w, "data: {\"directory\":\"/d\",\"payload\":{\"type\":\"mcp.tools.changed\",\"properties\":{\"server\":\"s\"}}}\n\n")
				fl.Flush()
				return
			case 2: // silent: never another byte
				<-r.Context().Done()
				return
			default: // healthy: a heartbeat every 10 s
				_, _ = io.WriteString(w, "data: garbage\n\n")
				for {
					select {
					case <-r.Context().Done():
						return
					case <-time.After(10 * time.Second):
						_, _ = io.WriteString(w, "data: {\"payload\":{\"type\":\"server.heartbeat\",\"properties\":{}}}\n\n")
						fl.Flush()
					}
				}
			}
		})
		l := fakeopencode.NewPipeListener()
		hs := &http.Server{Handler: v1Detected(h)}
		served := make(chan struct{})
		go func() { defer close(served); _ = hs.Serve(l) }()
		tr := &http.Transport{DialContext: l.Dial}
		c, _ := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Transport: tr}})

		var events []opencode.Event
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.Stream(ctx, opencode.StreamOptions{Silence: 30 * time.Second}, func(ev opencode.Event) {
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			})
		}()
		start := time.Now()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		mu.Lock()
		if subs != 3 {
			t.Errorf("subscriptions = %d, want 3 (drop, silence, healthy)", subs)
		}
		if len(subTimes) == 3 {
			// Re-subscribed within the backoff after the drop, and about 30 s
			// (three heartbeats) after the silence began.
			if d := subTimes[1].Sub(start); d > 2*time.Second {
				t.Errorf("re-subscribe after drop took %v", d)
			}
			if d := subTimes[2].Sub(subTimes[1]); d < 30*time.Second || d > 32*time.Second {
				t.Errorf("re-subscribe after silence took %v, want 30 s + backoff", d)
			}
		}
		var types []string
		for _, e := range events {
			types = append(types, e.Type)
		}
		mu.Unlock()
		want := "server.connected mcp.tools.changed server.connected server.connected"
		if got := strings.Join(types, " "); !strings.HasPrefix(got, want) {
			t.Errorf("events = %q, want prefix %q", got, want)
		}
		cancel()
		<-done
		tr.CloseIdleConnections()
		_ = hs.Close()
		<-served
	})
}

// Rule 10 with a wrong password: the stream backs off to the cap instead
// of hammering.
func TestStreamUnauthorizedBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fakeopencode.New(nil)
		fake.Password = "right"
		tr, stop := fake.Serve()
		defer stop()
		c, _ := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Transport: tr, Password: "wrong"}})
		var lastErr error
		attempts := 0
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.Stream(ctx, opencode.StreamOptions{OnDrop: func(err error) { lastErr = err; attempts++ }}, func(opencode.Event) {})
		}()
		time.Sleep(10 * time.Minute)
		cancel()
		<-done
		// 0.5, 1, 2, 4, 8, 16, then every 30 s: about 26 in 10 minutes
		// (each attempt a detection the fake refuses).
		if attempts > 30 || fake.Count("401", "", "") == 0 {
			t.Fatalf("%d refused attempts in 10 minutes", attempts)
		}
		if !errors.Is(lastErr, opencode.ErrUnauthorized) {
			t.Fatalf("last error = %v, want ErrUnauthorized", lastErr)
		}
	})
}

func TestParseEvent(t *testing.T) {
	ev, err := opencode.ParseEvent([]byte(`{"directory":"/tmp/p","project":"global","payload":{"id":"e","type":"mcp.tools.changed","properties":{"server":"every thing"}}}`))
	if err != nil || ev.Kind != opencode.KindServerFailed || ev.Type != "mcp.tools.changed" || ev.Server != "every thing" || ev.Directory != "/tmp/p" {
		t.Fatalf("ParseEvent = %+v, %v", ev, err)
	}
	ev, err = opencode.ParseEvent([]byte(`{"directory":"global","payload":{"type":"server.instance.disposed","properties":{"directory":"/x"}}}`))
	if err != nil || ev.Kind != opencode.KindInstanceGone || ev.Directory != "/x" {
		t.Fatalf("disposed = %+v, %v", ev, err)
	}
	for typ, want := range map[string]opencode.Kind{"global.disposed": opencode.KindAllGone, "session.status": opencode.KindActivity,
		"message.part.updated": opencode.KindActivity, "project.updated": opencode.KindOther, "server.heartbeat": opencode.KindOther} {
		ev, err = opencode.ParseEvent([]byte(`{"directory":"/p","payload":{"type":"` + typ + `","properties":{}}}`))
		if err != nil || ev.Kind != want {
			t.Errorf("%s: kind = %v, want %v (%v)", typ, ev.Kind, want, err)
		}
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"payload":{}}`, `{"payload":{"type":""}}`, `nope`} {
		if _, err := opencode.ParseEvent([]byte(bad)); err == nil {
			t.Errorf("ParseEvent(%q) = nil error", bad)
		}
	}
}

// OpenCode 1.x keeps no cooldown after a 429 (it has no such thing): a
// failure naming one is a failure like any other.
func TestParseStatusKnowsNoRateLimit(t *testing.T) {
	st, err := opencode.ParseStatus([]byte(`{"r":{"status":"failed","error":"Error POSTing to endpoint (HTTP 429): Too Many Requests"}}`))
	if err != nil || st["r"].Status != opencode.StatusFailed || st["r"].RateLimited {
		t.Fatalf("1.x status = %+v, %v; want failed, not rate limited", st, err)
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(`{"a":{"status":"connected"},"b c":{"status":"failed","error":"Connection closed"}}`))
	f.Add([]byte(`{"a":{"status":"failed","error":{"x":1}}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := opencode.ParseStatus(b)
		if err != nil {
			if st != nil {
				t.Fatal("error with a non-nil map")
			}
			return
		}
		if st == nil {
			t.Fatal("nil map without error: garbage must never read as no servers")
		}
	})
}
