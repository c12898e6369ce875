package opencode

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// A description whose body is cut mid-stream (the connection dropped:
// fewer bytes than its Content-Length, or a close-delimited body that
// ends inside the JSON) is not the server's final word: it is "not read
// yet", like a 503, and read again after a backoff step.
func TestDescriptionCutShortIsReadAgain(t *testing.T) {
	for name, cut := range map[string]func(w http.ResponseWriter){
		"short of its length": func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", strconv.Itoa(len(locationsDoc)))
			_, _ = w.Write([]byte(locationsDoc[:len(locationsDoc)/2]))
		},
		"closed inside the JSON": func(w http.ResponseWriter) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + locationsDoc[:len(locationsDoc)/2])
			_ = buf.Flush()
			_ = conn.Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var seen counts
				s := serveV2(t, func(w http.ResponseWriter, r *http.Request) {
					n := seen.add(r.URL.Path)
					switch r.URL.Path {
					case "/api/info":
						_, _ = w.Write([]byte(`{"version":"2.0.21","pid":4242,"urls":[]}`))
					case "/openapi.json":
						if n == 1 {
							cut(w)
							return
						}
						_, _ = w.Write([]byte(locationsDoc))
					case "/api/debug/location":
						_, _ = w.Write([]byte(`[{"directory":"/p"}]`))
					default:
						http.NotFound(w, r)
					}
				})
				ctx := context.Background()
				if _, _, err := s.Detect(ctx); err != nil {
					t.Fatal(err)
				}
				_, known, err := s.BootedLocations(ctx)
				wait, ok := RetryAfter(err)
				if !known || !errors.Is(err, ErrNotYet) || !ok {
					t.Fatalf("after a description cut short: known=%v, err=%v; want ErrNotYet (not read yet)", known, err)
				}
				time.Sleep(wait)
				dirs, known, err := s.BootedLocations(ctx)
				if err != nil || !known || len(dirs) != 1 {
					t.Fatalf("after the backoff step: %v, %v, %v; want the list the whole description offers", dirs, known, err)
				}
				if n := seen.get("/openapi.json"); n != 2 {
					t.Errorf("description read %d times, want 2", n)
				}
			})
		})
	}
}
