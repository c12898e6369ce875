package statusapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

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
