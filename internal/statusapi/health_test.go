package statusapi

import (
	"encoding/json"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newHealthSource(url, gen string, connected bool, lastErr string) *fakeSource {
	return &fakeSource{gen: gen, snap: reconnect.Snapshot{URL: url, Stream: reconnect.StreamState{Connected: connected, LastError: lastErr}}}
}

func getHealth(t *testing.T, srcs []Source, path string) (int, Health) {
	t.Helper()
	s := &API{Sources: srcs, Broker: NewBroker(), Metrics: metrics.NewSet(), Token: testToken}
	hs := httptest.NewServer(s.Handler())
	defer func() {
		s.Broker.Close()
		hs.Close()
	}()
	resp, err := http.Get(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s Content-Type %q", path, ct)
	}
	var h Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if h.OK != (resp.StatusCode == http.StatusOK) {
		t.Errorf("%s: %d with ok=%v", path, resp.StatusCode, h.OK)
	}
	return resp.StatusCode, h
}

var errStuck = errors.New("reconnect: the engine of http://127.0.0.1:4096 is stuck: its lock has been held for over 500ms")

func TestReadyzWhenDetectedAndStreaming(t *testing.T) {
	code, h := getHealth(t, []Source{newHealthSource("http://127.0.0.1:4096", "1.x", true, "")}, "/readyz")
	if code != http.StatusOK || len(h.Servers) != 1 || !h.Servers[0].OK || h.Servers[0].Generation != "1.x" || !h.Servers[0].StreamConnected {
		t.Fatalf("readyz = %d %+v", code, h)
	}
}

// Each server that is not ready is named with the reason; the others are
// listed as ready.
func TestReadyzSaysWhichIsNotReady(t *testing.T) {
	ready := newHealthSource("http://127.0.0.1:4096", "2.x", true, "")
	down := newHealthSource("http://127.0.0.1:4196", "1.x", false, "opencode at http://127.0.0.1:4196 refused the connection")
	unknown := newHealthSource("http://127.0.0.1:4296", "", false, "")
	code, h := getHealth(t, []Source{ready, down, unknown}, "/readyz")
	if code != http.StatusServiceUnavailable || len(h.Servers) != 3 {
		t.Fatalf("readyz = %d %+v, want 503 with three servers", code, h)
	}
	if !h.Servers[0].OK || h.Servers[0].Problem != "" {
		t.Errorf("the ready server: %+v", h.Servers[0])
	}
	if s := h.Servers[1]; s.OK || s.URL != down.snap.URL || !strings.Contains(s.Problem, "event stream not connected") || !strings.Contains(s.Problem, "refused the connection") {
		t.Errorf("the server whose stream is down: %+v", s)
	}
	if s := h.Servers[2]; s.OK || s.URL != unknown.snap.URL || !strings.Contains(s.Problem, "not detected") {
		t.Errorf("the server never detected: %+v", s)
	}
}

// A stuck engine makes both routes fail without waiting for its lock
// (Summary would), and an engine that does not run yet is not ready but
// alive.
func TestHealthOfStuckAndStartingEngines(t *testing.T) {
	stuck := newHealthSource("http://127.0.0.1:4096", "1.x", true, "")
	stuck.alive = errStuck
	for _, path := range []string{"/healthz", "/readyz"} {
		code, h := getHealth(t, []Source{stuck}, path)
		if code != http.StatusServiceUnavailable || len(h.Servers) != 1 || h.Servers[0].OK || !strings.Contains(h.Servers[0].Problem, "stuck") || h.Servers[0].URL != stuck.snap.URL {
			t.Errorf("%s with a stuck engine = %d %+v, want 503 naming it", path, code, h)
		}
	}
	if n := stuck.snapshots.Load(); n != 0 {
		t.Errorf("a stuck engine's status was asked %d times", n)
	}
	starting := newHealthSource("http://127.0.0.1:4096", "", false, "")
	starting.alive = reconnect.ErrNotStarted
	if code, h := getHealth(t, []Source{starting}, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz while starting = %d %+v, want 200", code, h)
	}
	if code, h := getHealth(t, []Source{starting}, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(h.Servers[0].Problem, "starting") {
		t.Errorf("readyz while starting = %d %+v, want 503 starting", code, h)
	}
}

// healthz is about the daemon, not OpenCode: a server that is down or
// was never found leaves it 200.
func TestHealthzIgnoresOpenCode(t *testing.T) {
	down := newHealthSource("http://127.0.0.1:4196", "1.x", false, "refused")
	unknown := newHealthSource("http://127.0.0.1:4296", "", false, "")
	code, h := getHealth(t, []Source{down, unknown}, "/healthz")
	if code != http.StatusOK || len(h.Servers) != 2 || !h.Servers[0].OK || !h.Servers[1].OK {
		t.Fatalf("healthz = %d %+v, want 200", code, h)
	}
}

// A detected server is ready while its stream is connected, and a
// daemon that watches nothing is not ready.
func TestReadyzFollowsTheStream(t *testing.T) {
	src := newHealthSource("http://127.0.0.1:4096", "1.x", true, "")
	if code, h := getHealth(t, []Source{src}, "/readyz"); code != http.StatusOK {
		t.Fatalf("readyz = %d %+v", code, h)
	}
	src.snap.Stream.Connected = false
	if code, _ := getHealth(t, []Source{src}, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the stream down = %d", code)
	}
	if code, _ := getHealth(t, nil, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz watching nothing = %d", code)
	}
}

// An engine whose Run has returned never checks again: /healthz says so
// (503), as the systemd watchdog does by the same rule (reconnect.Stuck).
// Before, it was 200 here while the watchdog stopped pinging.
func TestHealthzOfAStoppedEngine(t *testing.T) {
	stopped := newHealthSource("http://127.0.0.1:4096", "2.x", true, "")
	stopped.alive = reconnect.ErrStopped
	for _, path := range []string{"/healthz", "/readyz"} {
		code, h := getHealth(t, []Source{stopped}, path)
		if code != http.StatusServiceUnavailable || h.Servers[0].OK || !strings.Contains(h.Servers[0].Problem, "stopped") {
			t.Errorf("%s with a stopped engine = %d %+v, want 503 saying stopped", path, code, h)
		}
	}
}

// scrape is the /metrics body the API serves for srcs.
func scrape(t *testing.T, srcs []Source) string {
	t.Helper()
	s := &API{Sources: srcs, Broker: NewBroker(), Metrics: metrics.NewSet(), Token: testToken}
	hs := httptest.NewServer(s.Handler())
	defer func() {
		s.Broker.Close()
		hs.Close()
	}()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics = %d %v\n%s", resp.StatusCode, err, b)
	}
	return string(b)
}

// /metrics says per server what /readyz says, so that a sidecar without a
// readiness probe can still be alerted on: mcp_reconnect_ready 1 or 0,
// and the reason as a label of mcp_reconnect_ready_reason, read at the
// scrape; a stuck engine's lock is not waited for.
func TestMetricsShowReadiness(t *testing.T) {
	ready := newHealthSource("http://127.0.0.1:4096", "2.x", true, "")
	down := newHealthSource("http://127.0.0.1:4196", "1.x", false, "refused")
	unknown := newHealthSource("http://127.0.0.1:4296", "", false, "")
	stuck := newHealthSource("http://127.0.0.1:4396", "1.x", true, "")
	stuck.alive = errStuck
	starting := newHealthSource("http://127.0.0.1:4496", "", false, "")
	starting.alive = reconnect.ErrNotStarted
	body := scrape(t, []Source{ready, down, unknown, stuck, starting})
	for _, want := range []string{
		"# TYPE mcp_reconnect_ready gauge\n",
		`mcp_reconnect_ready{url="http://127.0.0.1:4096"} 1` + "\n",
		`mcp_reconnect_ready{url="http://127.0.0.1:4196"} 0` + "\n",
		`mcp_reconnect_ready{url="http://127.0.0.1:4296"} 0` + "\n",
		`mcp_reconnect_ready{url="http://127.0.0.1:4396"} 0` + "\n",
		`mcp_reconnect_ready{url="http://127.0.0.1:4496"} 0` + "\n",
		`mcp_reconnect_ready_reason{reason="ready",url="http://127.0.0.1:4096"} 1` + "\n",
		`mcp_reconnect_ready_reason{reason="stream_disconnected",url="http://127.0.0.1:4196"} 1` + "\n",
		`mcp_reconnect_ready_reason{reason="not_detected",url="http://127.0.0.1:4296"} 1` + "\n",
		`mcp_reconnect_ready_reason{reason="stuck",url="http://127.0.0.1:4396"} 1` + "\n",
		`mcp_reconnect_ready_reason{reason="starting",url="http://127.0.0.1:4496"} 1` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if n := stuck.snapshots.Load(); n != 0 {
		t.Errorf("a stuck engine's status was asked %d times", n)
	}
	// Read at each scrape: the stream comes back, the gauge follows.
	down.snap.Stream.Connected = true
	if body := scrape(t, []Source{down}); !strings.Contains(body, `mcp_reconnect_ready{url="http://127.0.0.1:4196"} 1`) ||
		!strings.Contains(body, `mcp_reconnect_ready_reason{reason="ready",url="http://127.0.0.1:4196"} 1`) {
		t.Errorf("after the stream came back:\n%s", body)
	}
}

// /metrics answers uncompressed even to a scraper that accepts gzip (a
// Prometheus server does): a gzip writer per scrape cost the daemon about
// 600 KiB of allocation for a few KiB of text on loopback.
func TestMetricsAreServedUncompressed(t *testing.T) {
	_, _, hs := newAPI(t)
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req) // no transparent decompression
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if enc := resp.Header.Get("Content-Encoding"); enc != "" || !strings.Contains(string(body), "# HELP") {
		t.Fatalf("GET /metrics with Accept-Encoding: gzip: Content-Encoding %q, body %.80q", enc, body)
	}
}

// Readiness is asked at every /readyz probe and every scrape of
// /metrics: it asks the stream alone, not the server's status (at 1,000
// directories a snapshot is 3.6 MiB, and the summary reads the process
// table for orphans and may ask OpenCode).
func TestReadinessTakesNoSnapshot(t *testing.T) {
	src := newHealthSource("http://127.0.0.1:4096", "1.x", true, "")
	s := &API{Sources: []Source{src}, Broker: NewBroker(), Metrics: metrics.NewSet(), Version: "test", Token: testToken}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Broker.Close()
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, body := request(t, hs, "GET", path, "", nil); code != http.StatusOK {
			t.Fatalf("GET %s = %d %.200q", path, code, body)
		}
	}
	if body := scrape(t, []Source{src}); !strings.Contains(body, `mcp_reconnect_ready{url="http://127.0.0.1:4096"} 1`) {
		t.Errorf("/metrics has no readiness gauge of the source: %q", grepLines(body, "mcp_reconnect_ready"))
	}
	if n := src.snapshots.Load(); n != 0 {
		t.Errorf("%d snapshots taken for readiness", n)
	}
}

func grepLines(s, sub string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}
