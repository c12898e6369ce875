package opencode_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"go.uber.org/goleak"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
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

// A user who gives --url https://… for an OpenCode that serves plain HTTP
// (OpenCode serves no TLS itself) is told, by every read, what net/http's
// Client says of it: "server gave HTTP response to HTTPS client", which
// names the fix, not "tls: first record does not look like a TLS
// handshake", which the transport itself says: every request, detection's
// too, is sent by the transport; one misconfiguration gets one message.
func TestHTTPSURLForPlainHTTPServerSaysSchemeMismatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "https://", 1)
	c, err := opencode.New(url, opencode.Options{Password: "pw", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := opencode.NewV2(url, opencode.Options{Password: "pw", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const want = "server gave HTTP response to HTTPS client"
	calls := map[string]func() error{
		"1.x GET /mcp":     func() error { _, err := c.MCPStatus(ctx, "/d"); return err },
		"1.x GET /config":  func() error { _, err := c.MCPConfig(ctx, "/d"); return err },
		"1.x POST connect": func() error { return c.Connect(ctx, "/d", "s") },
		"2.x GET /api/mcp": func() error { _, err := c2.MCPStatus(ctx, "/d"); return err },
		"detection": func() error {
			_, _, _, err := opencode.Detect(ctx, url, opencode.Options{Password: "pw"})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, want)
		}
	}
}

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

// OpenCode 2 says a remote server's endpoint answered 429 only in the
// status entry's error, in two exact forms: the MCP SDK's "Error POSTing
// to endpoint: <body>" with OpenCode's trailing "(HTTP 429)", and its own
// cooldown's "Error POSTing to endpoint: MCP endpoint cooldown after HTTP
// 429". The body is the MCP server's: text it chose, anywhere but at the
// end OpenCode writes, is no rate limit.
func TestRateLimitIsRecognisedOnlyInOpenCodesOwnWords(t *testing.T) {
	for errText, want := range map[string]bool{
		"Error POSTing to endpoint: Too Many Requests (HTTP 429)":                     true,
		"Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429":             true,
		"Error POSTing to endpoint: slow down (HTTP 429) (HTTP 500)":                  false,
		"Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429 (HTTP 500)":  false,
		"Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429, not really": false,
		"MCP error -32000: upstream answered HTTP 429":                                false,
		"MCP error -32000: Error POSTing to endpoint: x (HTTP 429) and more":          false,
		"tool failed (HTTP 429)": false,
		"HTTP 429":               false,
		"Connection closed":      false,
	} {
		body, _ := json.Marshal(map[string]any{"data": []any{map[string]any{"name": "r", "status": map[string]any{"status": "failed", "error": errText}}}})
		_, st, err := opencode.ParseStatusV2(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := st["r"].RateLimited; got != want {
			t.Errorf("error %q: rate limited = %v, want %v", errText, got, want)
		}
	}
}

// OpenCode never redirects, so a redirect is not followed: following it
// would carry the basic-auth password to wherever it points. A redirect
// to another port of the same host is the case that matters, since
// net/http itself drops Authorization only when the host name changes.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var reached []string // requests that arrived elsewhere, with their Authorization
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer elsewhere.Close()
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), code)
		}))
		o := opencode.Options{Password: "s3cret-pw", Timeout: 2 * time.Second}
		c1, err := opencode.New(origin.URL, o)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := opencode.NewV2(origin.URL, o)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		calls := map[string]func() error{
			"1.x GET /mcp":      func() error { _, err := c1.MCPStatus(ctx, "/d"); return err },
			"1.x GET /config":   func() error { _, err := c1.MCPConfig(ctx, "/d"); return err },
			"1.x POST connect":  func() error { return c1.Connect(ctx, "/d", "s") },
			"2.x GET /api/mcp":  func() error { _, err := c2.MCPStatus(ctx, "/d"); return err },
			"2.x POST connect":  func() error { return c2.Connect(ctx, "/d", "s") },
			"2.x GET /api/info": func() error { _, err := c2.Info(ctx); return err },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, opencode.ErrUnavailable) {
				t.Errorf("%d, %s: err = %v, want ErrUnavailable (a redirect is not an answer)", code, name, err)
			}
		}
		origin.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 0 {
		t.Fatalf("redirects were followed to another server: %q", reached)
	}
}
