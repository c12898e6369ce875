package daemon

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// The OpenCode 2 service restarts on another port; the daemon
// follows it (Discover), but the engine's URL (status, events, the url
// label) and the registry keep the first port for the daemon's lifetime.
// `status` then names a server nothing listens on, and `reconnect --url`
// with the service's real URL is answered "this daemon does not watch".
func TestServiceMovedPortIsReportedAndReachable(t *testing.T) {
	fake := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", AfterConnect: "connected"}})
	fake.SetHeartbeat(time.Second)
	a := httptest.NewServer(fake)
	var mu sync.Mutex
	current := a.URL
	discover := func(context.Context) (string, string, error) {
		mu.Lock()
		defer mu.Unlock()
		return current, fake2.DefaultPassword, nil
	}
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: a.URL, Discover: discover, ServiceFile: "/svc.json"}},
			StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig(), NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
			Ready: func(s string) { ready <- s }}, slog.New(slog.DiscardHandler))
	}()
	addr := <-ready
	var b *httptest.Server
	defer func() {
		cancel()
		<-done
		a.Close()
		if b != nil {
			b.Close()
		}
	}()
	waitFor(t, func() bool { return fake.Subscribers() == 1 })

	// The service restarts on another port.
	a.CloseClientConnections()
	a.Close()
	b = httptest.NewServer(fake)
	mu.Lock()
	current = b.URL
	mu.Unlock()
	waitFor(t, func() bool { return fake.Subscribers() == 1 })

	st, err := (&statusapi.Client{Addr: addr}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 1 || st.Servers[0].URL != b.URL {
		t.Errorf("status names %q after the service moved to %s", st.Servers[0].URL, b.URL)
	}
	// The entry is rewritten when the stream's first event arrives, a
	// moment after the subscription.
	var ents []registry.Entry
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ = reg.List()
		if len(ents) != 1 {
			t.Fatalf("registry: %+v", ents)
		}
		if ents[0].Watches(b.URL) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry still says %v after the service moved to %s: `reconnect --url` would not find this daemon", ents[0].URLs, b.URL)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = (&statusapi.Client{Addr: addr, Token: ents[0].Token}).Reconnect(context.Background(), statusapi.ReconnectRequest{URL: b.URL, Directory: "/p"})
	if err != nil {
		t.Errorf("reconnect --url %s (where the service now is): %v", b.URL, err)
	}
}
