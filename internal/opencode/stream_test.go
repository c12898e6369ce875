package opencode_test

import (
	"context"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const connectedFrame = "data: {\"payload\":{\"id\":\"evt\",\"type\":\"server.connected\",\"properties\":{}}}\n\n"

// pipeServer serves h, behind the answers that make a Server detect
// OpenCode 1.x (v1Detected), over an in-memory pipe inside a synctest
// bubble and returns a Server for it and a stop function.
func pipeServer(t *testing.T, h http.Handler) (*opencode.Server, func()) {
	t.Helper()
	l := fakeopencode.NewPipeListener()
	hs := &http.Server{Handler: v1Detected(h)}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(l) }()
	tr := &http.Transport{DialContext: l.Dial}
	s, err := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return s, func() {
		tr.CloseIdleConnections()
		_ = hs.Close()
		<-served
	}
}

// v1Detected answers a Server's detection as OpenCode 1.x does (GET
// /api/info 404, GET /global/health its version) and hands every other
// request, the event stream's, to h.
func v1Detected(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/info":
			http.NotFound(w, r)
		case "/global/health":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"healthy":true,"version":"1.18.34"}`)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// streamRun runs s.Stream in the background; stop cancels it and waits.
func streamRun(s *opencode.Server, opts opencode.StreamOptions, fn func(opencode.Event)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Stream(ctx, opts, fn)
	}()
	return func() { cancel(); <-done }
}

// recordLog is a slog handler that keeps the messages it gets.
type recordLog struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	h.msgs = append(h.msgs, msg)
	return nil
}
func (h *recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLog) WithGroup(string) slog.Handler      { return h }
func (h *recordLog) find(s string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.Contains(m, s) {
			return m
		}
	}
	return ""
}

// Rule 10: a message.part.updated over the size limit (a tool that read a
// large file) is skipped but for its head, which still arms and wakes its
// directory; the crash report behind it in the same write is delivered and
// the subscription goes on (it never ends with "event larger than
// 1 MiB", losing the crash report to a re-subscription).
func TestOversizedEventKeepsStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var subs atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			subs.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, connectedFrame)
			w.(http.Flusher).Flush()
			big := `{"directory":"/d","project":"p","payload":{"type":"message.part.updated","properties":{"part":{"type":"tool","state":{"output":"` +
				strings.Repeat("x", sse.MaxFrame+1) + `"}}},"id":"evt"}}`
			crash := `{"directory":"/d","project":"p","payload":{"type":"mcp.tools.changed","properties":{"server":"github"},"id":"evt"}}`
			_, _ = io.WriteString(w, "data: "+big+"\n\ndata: "+crash+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		c, stopServer := pipeServer(t, h)
		defer stopServer()
		var mu sync.Mutex
		var got []opencode.Event
		var drops []error
		logs := &recordLog{}
		stop := streamRun(c, opencode.StreamOptions{
			Log:    slog.New(logs),
			OnDrop: func(err error) { mu.Lock(); drops = append(drops, err); mu.Unlock() },
		}, func(ev opencode.Event) { mu.Lock(); got = append(got, ev); mu.Unlock() })
		synctest.Wait()
		mu.Lock()
		// The big event's head still arms and wakes /d (1.x puts the
		// directory and the type first); the rest of it is skipped.
		if len(got) != 3 || got[1].Kind != opencode.KindActivity || got[1].Directory != "/d" || got[1].Type != "message.part.updated" ||
			got[2].Kind != opencode.KindServerFailed || got[2].Server != "github" || got[2].Directory != "/d" {
			t.Errorf("events = %+v, want server.connected, the big event's activity in /d from its head, then the crash of github", got)
		}
		if len(drops) != 0 {
			t.Errorf("the subscription ended: %v", drops)
		}
		mu.Unlock()
		if n := subs.Load(); n != 1 {
			t.Errorf("%d subscriptions, want 1", n)
		}
		if m := logs.find("skipped an event"); !strings.Contains(m, "bytes=") {
			t.Errorf("no debug line for the skipped event: %q", logs.msgs)
		}
		stop()
	})
}

// A proxy that drops the stream right after server.connected must not get
// a re-subscribe twice a second forever: the backoff resets only after a
// subscription delivered events for 30 s. Before the fix
// any event reset it, and this test saw about 500 subscriptions. Every
// drop is a hiccup: OpenCode answers throughout, and the Server tells its
// watchers nothing.
func TestStreamBackoffGrowsWhenDroppedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var times []time.Time
		c, stopServer := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, connectedFrame)
		}))
		defer stopServer()
		var connects []opencode.Connected
		var changes []opencode.Change
		c.OnChange(func(ch opencode.Change, _ error) { changes = append(changes, ch) })
		stop := streamRun(c, opencode.StreamOptions{OnConnect: func(c opencode.Connected) { connects = append(connects, c) }}, func(opencode.Event) {})
		time.Sleep(5 * time.Minute)
		stop()
		stopServer()
		// 0.5, 1, 2, 4, 8, 16, then every 30 s (±20%): about 15 in 5 minutes.
		if n := len(times); n > 20 || n < 8 {
			t.Fatalf("%d subscriptions in 5 minutes, want about 15", n)
		}
		for i := 2; i < 7; i++ {
			if a, b := times[i-1].Sub(times[i-2]), times[i].Sub(times[i-1]); b <= a {
				t.Errorf("delay %d (%v) not longer than delay %d (%v)", i, b, i-1, a)
			}
		}
		for i, c := range connects {
			if c.N != i+1 {
				t.Errorf("connect %d = %+v", i, c)
			}
		}
		if len(changes) != 0 {
			t.Errorf("a stream dropped by a proxy was told as %v, want nothing", changes)
		}
	})
}

// A subscription that delivered events for 30 s has earned a fresh
// backoff: after it drops, the re-subscribe comes within the first step,
// however many short ones came before.
func TestStreamBackoffResetsAfterStableStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var times []time.Time
		c, stopServer := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			times = append(times, time.Now())
			n := len(times)
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, connectedFrame)
			w.(http.Flusher).Flush()
			if n != 6 {
				return // dropped at once
			}
			// The sixth stays healthy for a minute, then drops.
			for range 6 {
				time.Sleep(10 * time.Second)
				_, _ = io.WriteString(w, "data: {\"payload\":{\"type\":\"server.heartbeat\",\"properties\":{}}}\n\n")
				w.(http.Flusher).Flush()
			}
		}))
		defer stopServer()
		stop := streamRun(c, opencode.StreamOptions{}, func(opencode.Event) {})
		time.Sleep(3 * time.Minute)
		stop()
		stopServer()
		if len(times) < 7 {
			t.Fatalf("%d subscriptions", len(times))
		}
		// 0.5, 1, 2, 4, then 8 s (±20%) before the sixth.
		if d := times[5].Sub(times[4]); d < 6*time.Second {
			t.Errorf("the sixth subscribe came %v after the fifth: the short ones reset the backoff", d)
		}
		if d := times[6].Sub(times[5]) - time.Minute; d > 600*time.Millisecond {
			t.Errorf("re-subscribe %v after a stable stream dropped, want within the first step", d)
		}
	})
}

// A closed loopback port refuses; a server that answers 500 does not. Every
// call reports the first as ErrRefused (and ErrUnavailable), never the
// second.
func TestErrRefused(t *testing.T) {
	closed := closedAddr(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer srv.Close()
	ctx := context.Background()
	for name, url := range map[string]string{"refused": "http://" + closed, "500": srv.URL} {
		c := newClient(t, url, "pw")
		s, err := opencode.NewServer(opencode.ServerOptions{URL: url, Client: opencode.Options{Password: "pw", Timeout: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		stop := streamRun(s, opencode.StreamOptions{OnDrop: func(err error) {
			select {
			case stopped <- err:
			default:
			}
		}}, func(opencode.Event) {})
		streamErr := <-stopped
		stop()
		_, errStatus := c.MCPStatus(ctx, "/d")
		_, errConfig := c.MCPConfig(ctx, "/d")
		for call, err := range map[string]error{
			"status": errStatus, "config": errConfig,
			"connect": c.Connect(ctx, "/d", "s"), "stream": streamErr,
		} {
			if !errors.Is(err, opencode.ErrUnavailable) {
				t.Errorf("%s %s: err = %v, want ErrUnavailable", name, call, err)
			}
			if got := errors.Is(err, opencode.ErrRefused); got != (name == "refused") {
				t.Errorf("%s %s: errors.Is(ErrRefused) = %v (%v)", name, call, got, err)
			}
		}
	}
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// The Server, not the stream, tells a restart from a hiccup: after the
// stream ends, attempts refused by a closed port (OpenCode restarting)
// make its OnChange say Gone, and the next answer Replaced, before the
// stream subscribes again; attempts answered 500 (a running OpenCode) make
// it say nothing.
func TestStreamRestartIsToldByTheServer(t *testing.T) {
	var status atomic.Int32 // what the server answers; 0 is a working stream
	drop := make(chan struct{})
	srv := httptest.NewServer(v1Detected(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := status.Load(); code != 0 {
			http.Error(w, "down", int(code))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, connectedFrame)
		w.(http.Flusher).Flush()
		select {
		case <-drop:
		case <-r.Context().Done():
		}
	})))
	defer srv.Close()
	up, closed := srv.Listener.Addr().String(), closedAddr(t)
	var addr atomic.Value
	addr.Store(up)
	tr := &http.Transport{
		DisableKeepAlives: true, // every attempt dials
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr.Load().(string))
		},
	}
	defer tr.CloseIdleConnections()
	c, _ := opencode.NewServer(opencode.ServerOptions{URL: "http://opencode.test", Client: opencode.Options{Transport: tr}})
	var mu sync.Mutex
	var changes []opencode.Change
	told := func() []opencode.Change { mu.Lock(); defer mu.Unlock(); return slices.Clone(changes) }
	c.OnChange(func(ch opencode.Change, _ error) { mu.Lock(); changes = append(changes, ch); mu.Unlock() })
	connects := make(chan opencode.Connected, 100)
	drops := make(chan error, 1000)
	stop := streamRun(c, opencode.StreamOptions{
		Backoff:   backoff.Policy{Initial: time.Millisecond, Max: 5 * time.Millisecond},
		OnConnect: func(c opencode.Connected) { connects <- c },
		OnDrop:    func(err error) { drops <- err },
	}, func(opencode.Event) {})
	defer stop()
	waitFor := func(what string, ok func(error) bool) {
		t.Helper()
		deadline := time.After(30 * time.Second) // a hang guard, not a speed check
		for {
			select {
			case err := <-drops:
				if ok(err) {
					return
				}
			case <-deadline:
				t.Fatalf("no drop with %s", what)
			}
		}
	}
	next := func() opencode.Connected {
		t.Helper()
		select {
		case c := <-connects:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("no connect")
			return opencode.Connected{}
		}
	}
	if c := next(); c != (opencode.Connected{N: 1, Generation: opencode.V1, Version: "1.18.34"}) || len(told()) != 0 {
		t.Errorf("first connect = %+v, told %v", c, told())
	}

	// OpenCode restarts: nothing listens for a while.
	addr.Store(closed)
	drop <- struct{}{}
	waitFor("ErrRefused", func(err error) bool { return errors.Is(err, opencode.ErrRefused) })
	addr.Store(up)
	if c := next(); c != (opencode.Connected{N: 2, Generation: opencode.V1, Version: "1.18.34"}) {
		t.Errorf("connect after a refusal = %+v", c)
	}
	if got := told(); !slices.Equal(got, []opencode.Change{opencode.Gone, opencode.Replaced}) {
		t.Errorf("told %v by the connect after a refusal, want [gone replaced]", got)
	}

	// A hiccup: OpenCode answers, with an error, for a while.
	status.Store(http.StatusInternalServerError)
	drop <- struct{}{}
	waitFor("a 500", func(err error) bool {
		if errors.Is(err, opencode.ErrRefused) {
			t.Errorf("a 500 read as refused: %v", err)
		}
		var e *opencode.Error
		return errors.As(err, &e) && e.Status == 500
	})
	status.Store(0)
	if c := next(); c != (opencode.Connected{N: 3, Generation: opencode.V1, Version: "1.18.34"}) {
		t.Errorf("connect after a 500 = %+v", c)
	}
	if got := told(); !slices.Equal(got, []opencode.Change{opencode.Gone, opencode.Replaced}) {
		t.Errorf("told %v by the connect after a 500, want nothing more than [gone replaced]", got)
	}
}

// Only arming and waking is taken from an oversized event's head: one that
// would dispose a directory (or anything else) is skipped whole.
func TestOversizedEventHeadOnlyWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, connectedFrame)
			big := `{"directory":"/d","payload":{"type":"server.instance.disposed","properties":{"directory":"/d","pad":"` +
				strings.Repeat("x", sse.MaxFrame+1) + `"}}}`
			_, _ = io.WriteString(w, "data: "+big+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		c, stopServer := pipeServer(t, h)
		defer stopServer()
		var mu sync.Mutex
		var got []opencode.Event
		stop := streamRun(c, opencode.StreamOptions{}, func(ev opencode.Event) { mu.Lock(); got = append(got, ev); mu.Unlock() })
		synctest.Wait()
		stop()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("events = %+v, want only server.connected", got)
		}
	})
}

// Rule 10: a stream silent past three heartbeats is dropped. 1.x sends
// server.heartbeat about every 10 s, so a 1.x stream silent for 30 s is
// dead, not after a 45 s default shared with 2.x (15 s late).
func TestV1StreamDroppedAfterThreeMissedHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var subs []time.Time
		start := time.Now()
		c, stopServer := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			subs = append(subs, time.Now())
			first := len(subs) == 1
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, connectedFrame)
			w.(http.Flusher).Flush()
			if first {
				for range 3 { // heartbeats at 10, 20, 30 s, then silence
					select {
					case <-time.After(10 * time.Second):
					case <-r.Context().Done():
						return
					}
					_, _ = io.WriteString(w, "data: {\"payload\":{\"type\":\"server.heartbeat\",\"properties\":{}}}\n\n")
					w.(http.Flusher).Flush()
				}
			}
			<-r.Context().Done()
		}))
		defer stopServer()
		stop := streamRun(c, opencode.StreamOptions{}, func(opencode.Event) {})
		time.Sleep(90 * time.Second)
		stop()
		stopServer()
		mu.Lock()
		defer mu.Unlock()
		if len(subs) < 2 {
			t.Fatalf("no re-subscribe in 90 s")
		}
		// Last heartbeat at 30 s; three missed heartbeats = 30 s more; the
		// first re-subscribe step is 0.5 s (±20%).
		if at := subs[1].Sub(start); at > 61*time.Second || at < 60*time.Second {
			t.Fatalf("re-subscribed %v after start, %v after the last heartbeat; want three 10 s heartbeats (30 s)", at, at-30*time.Second)
		}
	})
}

// 2.x sends a heartbeat comment every 15 s: its stream is dropped after
// 45 s of silence, not after 1.x's 30 s.
func TestV2StreamDroppedAfterThreeMissedHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var subs []time.Time
		start := time.Now()
		l := fakeopencode.NewPipeListener()
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/api/info":
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"version":"2.0.21","pid":4242,"urls":[],"paths":{}}`)
				return
			case "/api/event":
			default:
				http.NotFound(w, r)
				return
			}
			mu.Lock()
			subs = append(subs, time.Now())
			first := len(subs) == 1
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"id\":\"e\",\"type\":\"server.connected\",\"data\":{}}\n\n")
			w.(http.Flusher).Flush()
			if first {
				for range 2 { // heartbeat comments at 15 and 30 s, then silence
					select {
					case <-time.After(15 * time.Second):
					case <-r.Context().Done():
						return
					}
					_, _ = io.WriteString(w, ": heartbeat\n\n")
					w.(http.Flusher).Flush()
				}
			}
			<-r.Context().Done()
		})}
		served := make(chan struct{})
		go func() { defer close(served); _ = hs.Serve(l) }()
		tr := &http.Transport{DialContext: l.Dial}
		s, err := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Password: "pw", Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Stream(ctx, opencode.StreamOptions{}, func(opencode.Event) {}) }()
		time.Sleep(100 * time.Second)
		cancel()
		<-done
		tr.CloseIdleConnections()
		_ = hs.Close()
		<-served
		mu.Lock()
		defer mu.Unlock()
		if len(subs) < 2 {
			t.Fatalf("no re-subscribe in 100 s")
		}
		// Last heartbeat at 30 s; three missed 15 s heartbeats = 45 s more.
		if at := subs[1].Sub(start); at < 75*time.Second || at > 76*time.Second {
			t.Fatalf("re-subscribed %v after start, %v after the last heartbeat; want three 15 s heartbeats (45 s)", at, at-30*time.Second)
		}
	})
}

// An OpenCode 2 event over the size limit still arms and wakes its
// directory from its head (type and location come before the data).
func TestV2OversizedEventWakesFromItsHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fakeopencode.NewPipeListener()
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/api/info":
				_, _ = io.WriteString(w, `{"version":"2.0.21","pid":4242,"urls":[],"paths":{}}`)
				return
			case "/api/event":
			default:
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"id\":\"e\",\"type\":\"server.connected\",\"data\":{}}\n\n")
			big := `{"id":"e2","created":1,"type":"session.step.finished","location":{"directory":"/big"},"data":{"output":"` + strings.Repeat("x", sse.MaxFrame+1) + `"}}`
			_, _ = io.WriteString(w, "data: "+big+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})}
		served := make(chan struct{})
		go func() { defer close(served); _ = hs.Serve(l) }()
		tr := &http.Transport{DialContext: l.Dial}
		s, err := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Password: "pw", Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var got []opencode.Event
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = s.Stream(ctx, opencode.StreamOptions{}, func(ev opencode.Event) { mu.Lock(); got = append(got, ev); mu.Unlock() })
		}()
		synctest.Wait()
		cancel()
		<-done
		tr.CloseIdleConnections()
		_ = hs.Close()
		<-served
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 || got[1].Kind != opencode.KindActivity || got[1].Directory != "/big" {
			t.Fatalf("events = %+v, want server.connected, then the big event's activity in /big", got)
		}
	})
}
