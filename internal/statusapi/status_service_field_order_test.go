package statusapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// GET /status writes a server of the OpenCode 2 service as its struct
// encodes: the snapshot's fields (directories last of them), then
// "service", byte for byte what encoding the whole Status at once writes
// (writeJSON), though its directories are written one at a time.
func TestStatusKeepsDirectoriesBeforeService(t *testing.T) {
	src := &listingSource{fakeSource: fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4096", Directories: manyDirs(1, 1)},
		svc: &Service{File: "/run/opencode/service.json", PID: 42, Version: "2.0.0"}}, written: func() int { return 0 }}
	s := &API{Sources: []Source{src}, Broker: NewBroker(), Metrics: metrics.NewSet(), Version: "test", Token: testToken}
	defer s.Broker.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/status", nil)
	req.Host = "127.0.0.1:4100"
	s.Handler().ServeHTTP(rec, req)
	body := rec.Body.String()

	// What the handler wrote before: the whole Status encoded at once.
	old := httptest.NewRecorder()
	writeJSON(old, http.StatusOK, Status{Version: "test", Servers: []ServerStatus{{Snapshot: src.snap, Service: src.svc}}})
	want := old.Body.String()
	if strings.Index(want, `"directories"`) > strings.Index(want, `"service"`) {
		t.Fatalf("writeJSON itself puts service first:\n%s", want)
	}
	if d, sv := strings.Index(body, `"directories"`), strings.Index(body, `"service"`); d < 0 || sv < 0 || d > sv {
		t.Errorf(`GET /status puts "directories" (at %d) after "service" (at %d); writeJSON put it before:
%s`, d, sv, body)
	}
	// Past the head (time, daemon), the bytes must be the same.
	tail := func(s string) string { return s[strings.Index(s, `"servers"`):] }
	if tail(body) != tail(want) {
		t.Errorf("GET /status body differs from writeJSON's:\n--- got\n%s\n--- want\n%s", tail(body), tail(want))
	}
}
