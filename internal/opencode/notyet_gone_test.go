package opencode_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// The pacing of "not yet" belongs to one stretch of a service starting
// (or stopping): once OpenCode is gone (nothing listens) the process that
// comes back is another, and its first "not yet" waits one step again,
// not the step the old one had reached.
func TestNotYetPacingStartsAfreshAfterOpenCodeWasGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "opencode.gone:4096"
		hosts := fakeopencode.NewHosts()
		t.Cleanup(hosts.Close)
		hosts.Serve(host, notReady("service_stopping", "1"))
		s, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + host, Client: opencode.Options{Password: "pw", Transport: hosts.Transport()}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var wait time.Duration
		for range 5 {
			_, _, err := s.Detect(ctx)
			var ok bool
			if wait, ok = opencode.RetryAfter(err); !ok {
				t.Fatalf("detect: %v; want not yet", err)
			}
			time.Sleep(wait)
		}
		if wait < 10*time.Second {
			t.Fatalf("setup: the fifth wait is %v; want the pacing grown to about 16 s", wait)
		}
		hosts.Stop(host)
		if _, _, err := s.Detect(ctx); !errors.Is(err, opencode.ErrRefused) {
			t.Fatalf("with nothing listening: %v; want refused", err)
		}
		hosts.Serve(host, notReady("service_starting", "1"))
		_, _, err = s.Detect(ctx)
		if wait, ok := opencode.RetryAfter(err); !ok || wait > 1200*time.Millisecond {
			t.Fatalf("the first not yet after OpenCode was gone: %v (wait %v); want about a second", err, wait)
		}
	})
}
