package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// hostSpeed is how long one status read of ten servers takes over
// loopback HTTP in this process, client and server, on one processor,
// now: what BenchmarkStatusRead -cpu 1 measures. The idle CPU of the
// scale benchmark is time spent on the same work, so the two move
// together when the (virtual) machine runs slower or faster; the table
// prints it beside the figures so that runs can be compared.
func hostSpeed(b *testing.B) time.Duration {
	body := []byte(`{"s0":{"status":"connected"},"s1":{"status":"connected"},"s2":{"status":"connected"},"s3":{"status":"connected"},"s4":{"status":"connected"},"s5":{"status":"connected"},"s6":{"status":"connected"},"s7":{"status":"connected"},"s8":{"status":"connected"},"dead":{"status":"failed","error":"Connection closed"}}`)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer hs.Close()
	c, err := opencode.New(hs.URL, opencode.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx := context.Background()
	const reads = 5000
	start := time.Now()
	for range reads {
		if _, err := c.MCPStatus(ctx, "/bench/dir 0001"); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / reads
}
