package statusapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
)

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
