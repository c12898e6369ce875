package opencode_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

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
