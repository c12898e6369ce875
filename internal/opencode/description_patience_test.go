package opencode

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A description that never answers must not hold the checks that need
// the booted locations for as long as the process runs: after a bounded
// number of failed reads they go on as without a description (known
// false: the engine reads as on 2.0.21), and say so once in the log and
// in the capabilities status and doctor show. The reads go on with
// backoff meanwhile.
func TestDescriptionThatNeverAnswersStopsHoldingChecksLoudly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen counts
		hosts := fakeopencode.NewHosts()
		t.Cleanup(hosts.Close)
		hosts.Serve(descHost, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.add(r.URL.Path)
			switch r.URL.Path {
			case "/api/info":
				_, _ = w.Write([]byte(`{"version":"2.0.21","pid":4242,"urls":[]}`))
			case "/openapi.json":
				w.WriteHeader(http.StatusServiceUnavailable)
			default:
				http.NotFound(w, r)
			}
		}))
		var logs syncBuffer
		s, err := NewServer(ServerOptions{URL: "http://" + descHost, Client: Options{Password: "pw", Transport: hosts.Transport()},
			Log: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		start := time.Now()
		var gaveUp time.Duration
		for time.Since(start) < 10*time.Minute {
			_, known, err := s.BootedLocations(ctx)
			if !known && err == nil {
				gaveUp = time.Since(start)
				break
			}
			if !errors.Is(err, ErrNotYet) {
				t.Fatalf("while the description fails: %v, %v; want not yet", known, err)
			}
			wait, _ := RetryAfter(err)
			time.Sleep(wait)
		}
		if gaveUp == 0 || gaveUp > 2*time.Minute {
			t.Fatalf("checks still held by a description failing for %v (%d reads); want them to go on after a bounded wait", time.Since(start), seen.get("/openapi.json"))
		}
		if _, known, err := s.BootedLocations(ctx); known || err != nil {
			t.Fatalf("after the bound: %v, %v; want known false", known, err)
		}
		if n := strings.Count(logs.String(), "no longer wait"); n != 1 {
			t.Fatalf("%d warnings that the checks no longer wait, want one:\n%s", n, logs.String())
		}
		if c := capability(s.Capabilities(ctx), CapLocations); c.Available() || !strings.Contains(c.Without, "now go on without it") {
			t.Errorf("capability after the bound: %+v; want it to say the checks no longer wait", c)
		}
		reads := seen.get("/openapi.json")
		time.Sleep(3 * time.Minute)
		_, _, _ = s.BootedLocations(ctx)
		if seen.get("/openapi.json") == reads {
			t.Error("the description is no longer read after the bound; want its reads to go on with backoff")
		}
	})
}
