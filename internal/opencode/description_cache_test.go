package opencode

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// The API description is the process's: every re-subscribe of the event
// stream detects again, and must not read GET /openapi.json (about 300 KB)
// again while the same OpenCode process answers. Another process (a new
// pid: OpenCode restarted) is read anew.
func TestDescriptionIsReadOncePerProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen counts
		var pid atomic.Int32
		pid.Store(4242)
		s := serveV2(t, func(w http.ResponseWriter, r *http.Request) {
			seen.add(r.URL.Path)
			switch r.URL.Path {
			case "/api/info":
				_, _ = fmt.Fprintf(w, `{"version":"2.0.21","pid":%d,"urls":[]}`, pid.Load())
			case "/openapi.json":
				_, _ = w.Write([]byte(locationsDoc))
			case "/api/debug/location":
				_, _ = w.Write([]byte(`[{"directory":"/p"}]`))
			default:
				http.NotFound(w, r)
			}
		})
		ctx := context.Background()
		for i := range 3 { // the first detection, then two re-subscribes
			if _, _, err := s.Detect(ctx); err != nil {
				t.Fatal(err)
			}
			if _, known, err := s.BootedLocations(ctx); !known || err != nil {
				t.Fatalf("detection %d: %v, %v", i, known, err)
			}
		}
		if n := seen.get("/openapi.json"); n != 1 {
			t.Fatalf("description read %d times by three detections of one process, want once", n)
		}
		pid.Store(4243) // OpenCode restarted
		if _, _, err := s.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		if _, known, err := s.BootedLocations(ctx); !known || err != nil {
			t.Fatal(known, err)
		}
		if n := seen.get("/openapi.json"); n != 2 {
			t.Fatalf("description read %d times after OpenCode restarted, want it read again (2)", n)
		}
	})
}
