package statusapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeSource struct {
	mu    sync.Mutex
	calls []ReconnectRequest
	armed []string // "dir reason"
	snap  reconnect.Snapshot
}

func (f *fakeSource) Arm(dir, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if dir == "relative" {
		return errors.New(`directory "relative" is not an absolute path`)
	}
	f.armed = append(f.armed, dir+" "+reason)
	return nil
}

func (f *fakeSource) Snapshot() reconnect.Snapshot { return f.snap }

func (f *fakeSource) Reconnect(dir string, names []string) (reconnect.ReconnectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if dir == "relative" {
		return reconnect.ReconnectResult{}, errors.New(`directory "relative" is not an absolute path`)
	}
	f.calls = append(f.calls, ReconnectRequest{Directory: dir, Servers: names})
	return reconnect.ReconnectResult{URL: f.snap.URL, Directories: []string{dir}}, nil
}

func newAPI(t *testing.T) (*fakeSource, *API, *httptest.Server) {
	t.Helper()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	src := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4096", Stream: reconnect.StreamState{Connected: true, Since: now},
		Directories: []reconnect.DirSnapshot{{Directory: "/p/my project", ArmedBy: "mcp.tools.changed", ArmedAt: now, Servers: []reconnect.ServerSnapshot{
			{Name: "github", Status: "failed", Error: "Connection closed", Attempts: 3, Tier: "fast", NextAttempt: now.Add(4 * time.Second)},
			{Name: "sentry", Status: "needs_auth", Hint: "run: opencode mcp auth sentry"},
		}}}}}
	s := &API{Sources: []Source{src}, Broker: NewBroker(), Metrics: metrics.NewSet(), Version: "test", Token: testToken}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Broker.Close()
		hs.Close()
	})
	return src, s, hs
}

const testToken = "the-right-token-0123456789abcdef"

func TestStatusAndTable(t *testing.T) {
	_, _, hs := newAPI(t)
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://")}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 1 || st.Servers[0].Directories[0].Servers[0].Attempts != 3 {
		t.Fatalf("status = %+v", st)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, st, time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"/p/my project", "github", "failed", "in 3s", "Connection closed", "opencode mcp auth sentry", "events: connected"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestReconnect(t *testing.T) {
	src, _, hs := newAPI(t)
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	res, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "/p/x y", Servers: []string{"a/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Directories[0] != "/p/x y" {
		t.Fatalf("result = %+v", res)
	}
	if len(src.calls) != 1 || src.calls[0].Servers[0] != "a/b" {
		t.Fatalf("calls = %+v", src.calls)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "relative"}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative directory: err = %v", err)
	}
}

// A reconnect with keep makes its directory the daemon's own (armed as
// --directory, kept through OpenCode's restarts); one without does not.
func TestReconnectKeepArmsTheDirectoryAsTheUsersOwn(t *testing.T) {
	src, _, hs := newAPI(t)
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "/p/plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "/p/my projéct", Keep: true}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/p/my projéct " + reconnect.ArmedByFlag}; !slices.Equal(src.armed, want) {
		t.Fatalf("armed = %q, want %q", src.armed, want)
	}
	if len(src.calls) != 2 {
		t.Fatalf("reconnects = %+v, want both", src.calls)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Keep: true}); err == nil || !strings.Contains(err.Error(), "keep needs a directory") {
		t.Fatalf("keep without a directory: err = %v", err)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "relative", Keep: true}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("keep of a relative directory: err = %v", err)
	}
	if len(src.armed) != 1 || len(src.calls) != 2 {
		t.Fatalf("refused requests reached the engine: armed %q, calls %+v", src.armed, src.calls)
	}
}

// A web page must not be able to drive POST /reconnect or read status.
func TestCrossOriginRefused(t *testing.T) {
	src, _, hs := newAPI(t)
	post := func(hdr map[string]string, ctype string) int {
		req, _ := http.NewRequest("POST", hs.URL+"/reconnect", strings.NewReader(`{}`))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(map[string]string{"Origin": "https://evil.example"}, "application/json"); code != http.StatusForbidden {
		t.Errorf("cross-origin POST = %d, want 403", code)
	}
	if code := post(map[string]string{"Sec-Fetch-Site": "cross-site"}, "application/json"); code != http.StatusForbidden {
		t.Errorf("Sec-Fetch-Site cross-site POST = %d, want 403", code)
	}
	if code := post(map[string]string{"Authorization": "Bearer " + testToken}, "text/plain"); code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain POST (a CORS simple request) = %d, want 415", code)
	}
	if len(src.calls) != 0 {
		t.Fatalf("refused requests reached the engine: %+v", src.calls)
	}
	if code := post(map[string]string{"Authorization": "Bearer " + testToken}, "application/json"); code != http.StatusOK {
		t.Errorf("same-machine POST = %d, want 200", code)
	}
}

func TestMetrics(t *testing.T) {
	_, s, hs := newAPI(t)
	m := s.Metrics.For("")
	for range 3 {
		m.Attempts.Inc()
	}
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	for _, want := range []string{`mcp_reconnect_connect_attempts_total{url=""} 3`, "mcp_reconnect_armed_directories", "mcp_reconnect_event_stream_reconnects_total", "mcp_reconnect_status_read_failures_total", "mcp_reconnect_connects_in_flight"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestEventsStream(t *testing.T) {
	_, s, hs := newAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	_, _ = r.ReadString('\n') // the opening comment
	_, _ = r.ReadString('\n')
	s.Broker.Publish(reconnect.Event{Type: reconnect.EventReconnected, Directory: "/p", Server: "s"})
	name, _ := r.ReadString('\n')
	data, _ := r.ReadString('\n')
	if name != "event: reconnected\n" {
		t.Fatalf("event line = %q", name)
	}
	var ev reconnect.Event
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(data), "data: ")), &ev); err != nil || ev.Server != "s" {
		t.Fatalf("data = %q (%v)", data, err)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:4097", "[::1]:4097", "localhost:0", "127.0.0.2:1"} {
		if err := CheckAddr(ok, false); err != nil {
			t.Errorf("CheckAddr(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:4097", ":4097", "192.0.2.1:4097", "example.com:1", "nonsense"} {
		if err := CheckAddr(bad, false); err == nil {
			t.Errorf("CheckAddr(%q) = nil, want refusal", bad)
		}
	}
	if err := CheckAddr("0.0.0.0:4097", true); err != nil {
		t.Errorf("explicitly public: %v", err)
	}
}

func TestClientNamesTheFixWhenNoDaemon(t *testing.T) {
	c := &Client{Addr: "127.0.0.1:1"}
	_, err := c.Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "mcp-reconnect watch") {
		t.Fatalf("err = %v", err)
	}
}
