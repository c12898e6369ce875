package statusapi

import (
	"encoding/json"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"iter"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// listingSource hands its directories out one at a time, as the daemon's
// engines do; written counts the bytes of the body the client had when
// each directory was asked for.
type listingSource struct {
	fakeSource
	written func() int
	seen    []int
}

func (l *listingSource) Directories() iter.Seq[reconnect.DirSnapshot] {
	return func(yield func(reconnect.DirSnapshot) bool) {
		for _, d := range l.snap.Directories {
			l.seen = append(l.seen, l.written())
			if !yield(d) {
				return
			}
		}
	}
}

func manyDirs(n, servers int) []reconnect.DirSnapshot {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var out []reconnect.DirSnapshot
	for i := range n {
		d := reconnect.DirSnapshot{Directory: fmt.Sprintf("/p/dir %04d <&>", i), ArmedBy: "flag", ArmedAt: now}
		for j := range servers {
			d.Servers = append(d.Servers, reconnect.ServerSnapshot{Name: fmt.Sprintf("s%d", j), Status: "failed", Error: "Connection closed \"x\"", Attempts: j, NextAttempt: now})
		}
		out = append(out, d)
	}
	return out
}

// GET /status of an engine that lists its directories one at a time says
// exactly what the whole snapshot, encoded at once, says (a server
// with no directories at all included); and the body goes
// out while the directories are read: the daemon never holds all of them,
// nor the whole body, at once.
func TestStatusIsWrittenOneDirectoryAtATime(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rec := httptest.NewRecorder()
	big := &listingSource{fakeSource: fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4096", Stream: reconnect.StreamState{Connected: true, Since: now},
		Directories: manyDirs(200, 10)}}, written: func() int { return rec.Body.Len() }}
	plain := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4097", Directories: manyDirs(2, 1)}}
	empty := &listingSource{fakeSource: fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4098", Directories: []reconnect.DirSnapshot{}}}, written: func() int { return 0 }}
	s := &API{Sources: []Source{big, plain, empty}, Broker: NewBroker(), Metrics: metrics.NewSet(), Version: "test", Token: testToken}
	defer s.Broker.Close()
	req := httptest.NewRequest(http.MethodGet, "/status", nil)
	req.Host = "127.0.0.1:4100"
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /status: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	body := rec.Body.Bytes()

	var got, want any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("the body is not JSON: %v\n%s", err, body[:min(len(body), 2000)])
	}
	whole := Status{Version: "test", Daemon: self(), Servers: []OpenCodeStatus{{Snapshot: big.snap}, {Snapshot: plain.snap}, {Snapshot: empty.snap}}}
	raw, _ := json.Marshal(whole)
	_ = json.Unmarshal(raw, &want)
	// The time and the daemon's own figures are read at the request.
	for _, m := range []any{got, want} {
		delete(m.(map[string]any), "time")
		delete(m.(map[string]any), "daemon")
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the status written one directory at a time differs from the whole snapshot:\n%.3000s", body)
	}
	// Past the head (time, daemon), byte for byte what writeJSON writes.
	old := httptest.NewRecorder()
	writeJSON(old, http.StatusOK, whole)
	tail := func(s string) string { return s[strings.Index(s, `"servers"`):] }
	if tail(string(body)) != tail(old.Body.String()) {
		t.Errorf("the body differs from writeJSON's:\n--- got\n%.2000s\n--- want\n%.2000s", tail(string(body)), tail(old.Body.String()))
	}
	if !strings.HasSuffix(string(body), "}\n") || !strings.Contains(string(body), "\n        {\n          \"directory\": \"/p/dir 0000 \\u003c\\u0026\\u003e\"") {
		t.Errorf("not indented as the rest of the API:\n%.600s", body)
	}

	// 200 directories of ten servers are about 600 KB: by the last one
	// asked for, most of the body is out.
	if len(big.seen) != 200 {
		t.Fatalf("%d directories were asked for one at a time, want 200", len(big.seen))
	}
	if last := big.seen[len(big.seen)-1]; last < len(body)/2 {
		t.Errorf("when the last directory was asked for, %d of %d bytes were written: the body is built before it is sent", last, len(body))
	}
	if !slices.IsSorted(big.seen) {
		t.Errorf("written counts %v", big.seen)
	}
}

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
	writeJSON(old, http.StatusOK, Status{Version: "test", Servers: []OpenCodeStatus{{Snapshot: src.snap, Service: src.svc}}})
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
