package opencode

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// One list of statuses and one hint per status the user must fix: the
// engine, status, doctor and the events said needs_client_registration's
// fix in two wordings before.
func TestStatusesAndTheirHints(t *testing.T) {
	if !slices.Equal(StatusesV2[:1], []string{StatusConnected}) || !KnownStatus(StatusPending) || KnownStatus("disconnected") {
		t.Fatalf("statuses %v", StatusesV2)
	}
	for _, s := range StatusesV1 {
		if !slices.Contains(StatusesV2, s) {
			t.Errorf("%s is 1.x's but not 2.x's", s)
		}
	}
	if h := UserHint(StatusNeedsAuth, "my srv"); h != "run: opencode mcp auth 'my srv'" {
		t.Errorf("needs_auth hint %q", h)
	}
	if h := UserHint(StatusNeedsClientRegistration, "x"); h == "" {
		t.Error("needs_client_registration has no hint")
	}
	for _, s := range []string{StatusConnected, StatusFailed, StatusDisabled, StatusPending} {
		if h := UserHint(s, "x"); h != "" {
			t.Errorf("%s has a hint %q", s, h)
		}
	}
}

// statusServer answers every GET /mcp with ten servers, nine connected.
func statusServer(tb testing.TB) *Client {
	tb.Helper()
	body := []byte(`{"s0":{"status":"connected"},"s1":{"status":"connected"},"s2":{"status":"connected"},"s3":{"status":"connected"},"s4":{"status":"connected"},"s5":{"status":"connected"},"s6":{"status":"connected"},"s7":{"status":"connected"},"s8":{"status":"connected"},"dead":{"status":"failed","error":"Connection closed"}}`)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	tb.Cleanup(hs.Close)
	c, err := New(hs.URL, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// BenchmarkStatusRead is one idle check's read of GET /mcp over loopback
// HTTP: the daemon makes 2,000 a minute at 1,000 directories. Its figures
// include the in-process server's half.
func BenchmarkStatusRead(b *testing.B) {
	c := statusServer(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.MCPStatus(ctx, "/bench/dir 0001"); err != nil {
			b.Fatal(err)
		}
	}
}

// A status read over HTTP costs what the standard library's transport
// and server cost, and little of ours: the request is sent by the
// transport itself (the http.Client around it copied the headers for
// redirects it never follows) and the query is one string (a url.Values
// map encoded per read cost five allocations).
func TestStatusReadOverHTTPAllocatesLittle(t *testing.T) {
	c := statusServer(t)
	ctx := context.Background()
	read := func() {
		if _, err := c.MCPStatus(ctx, "/bench/dir 0001"); err != nil {
			t.Fatal(err)
		}
	}
	read() // the connection
	allocs := testing.AllocsPerRun(200, read)
	t.Logf("%.1f allocations per status read, client and server", allocs)
	if limit := maxStatusReadAllocs + raceAllocs; allocs > float64(limit) {
		t.Errorf("%.0f allocations per status read over HTTP (client and server), want at most %d", allocs, limit)
	}
}

// maxStatusReadAllocs: 83 today, client and in-process server together,
// and a margin of two; 91 through http.Client.Do with a url.Values query.
// The race detector adds its own (raceAllocs: 88 today).
const maxStatusReadAllocs = 85
