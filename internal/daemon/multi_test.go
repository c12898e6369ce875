package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

const (
	host1 = "opencode-one:4096"
	host2 = "opencode-two:49374"
)

// connectGauge counts connect calls in flight across every server.
type connectGauge struct {
	next         http.RoundTripper
	mu           sync.Mutex
	now, maximum int
}

func (g *connectGauge) RoundTrip(r *http.Request) (*http.Response, error) {
	connect := r.Method == "POST" && len(r.URL.Path) > len("/connect") && r.URL.Path[len(r.URL.Path)-len("/connect"):] == "/connect"
	if connect {
		g.mu.Lock()
		g.now++
		g.maximum = max(g.maximum, g.now)
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.now--
			g.mu.Unlock()
		}()
	}
	return g.next.RoundTrip(r)
}

// runTwo runs one daemon over a 1.x and a 2.x fake, each with directory /p
// armed, until the test ends.
func runTwo(t *testing.T, v1 *fakeopencode.Server, v2 *fake2.Server, maxConcurrent int) (*fakeopencode.Hosts, *connectGauge) {
	hosts := fakeopencode.NewHosts()
	hosts.Serve(host1, v1)
	hosts.Serve(host2, v2)
	gauge := &connectGauge{next: hosts.Transport()}
	ec := reconnect.DefaultConfig
	ec.Backoff.Jitter = 0
	ec.MaxConcurrent = maxConcurrent
	cfg := Config{
		Servers: []Target{
			{URL: "http://" + host1, Password: "one-pw", Directories: []string{"/p"}, Transport: gauge},
			{URL: "http://" + host2, Password: fake2.DefaultPassword, Directories: []string{"/p"}, Transport: gauge},
		},
		Engine: ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		hosts.Close()
	})
	return hosts, gauge
}

// One daemon watches a 1.x and a 2.x server: each recovers its own failed
// server, and one of them gone for 30 s changes nothing for the other.
func TestOneDaemonTwoServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"a": {Status: "failed", AfterConnect: "connected"}})
		v1.Password = "one-pw"
		v1.SetHeartbeat(10 * time.Second)
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", AfterConnect: "connected"}})
		hosts, _ := runTwo(t, v1, v2, 2)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := v1.Count("/mcp/{name}/connect", "/p", "a"); n != 1 {
			t.Fatalf("1.x connects of a = %d, want 1", n)
		}
		if n := v2.Count(fake2.RouteConnect, "/p", "b"); n != 1 {
			t.Fatalf("2.x connects of b = %d, want 1", n)
		}

		// The 1.x server goes away for 30 s; the 2.x server's b crashes
		// meanwhile and is brought back as usual.
		hosts.Stop(host1)
		time.Sleep(2 * time.Second)
		v2.Crash("/p", "b")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteConnect, "/p", "b"); n != 2 {
			t.Fatalf("2.x connects of b while 1.x was down = %d, want 2", n)
		}
		time.Sleep(25 * time.Second)
		hosts.Serve(host1, v1)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteUnauthorized, "", ""); n != 0 {
			t.Fatalf("%d refused requests on 2.x", n)
		}
		// 1.x restarted (it refused connections): its directory is
		// forgotten until used again; a session there arms it.
		v1.Publish("/p", "session.updated", nil)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := v1.Count("/mcp", "/p", ""); n < 2 {
			t.Fatalf("1.x status reads of /p after its return = %d", n)
		}
	})
}

// The connect budget is shared by every server: with --max-concurrent 1
// and a connect that hangs on each, only one is in flight at a time.
func TestBudgetSharedAcrossServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"a": {Status: "failed", ConnectDelay: 50 * time.Second}})
		v1.Password = "one-pw"
		v1.SetHeartbeat(10 * time.Second)
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", ConnectDelay: 50 * time.Second}})
		_, gauge := runTwo(t, v1, v2, 1)
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		gauge.mu.Lock()
		most := gauge.maximum
		gauge.mu.Unlock()
		if most != 1 {
			t.Fatalf("connects in flight at once across both servers = %d, want 1", most)
		}
		if v1.Count("/mcp/{name}/connect", "/p", "a") == 0 || v2.Count(fake2.RouteConnect, "/p", "b") == 0 {
			t.Fatal("one server never got a slot")
		}
	})
}

// One server refusing the password does not stop the daemon or the other
// server.
func TestOneServerRefusingThePasswordLeavesTheOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"a": {Status: "failed"}})
		v1.Password = "not-what-the-daemon-has"
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", AfterConnect: "connected"}})
		runTwo(t, v1, v2, 2)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteConnect, "/p", "b"); n != 1 {
			t.Fatalf("2.x connects of b = %d, want 1", n)
		}
		if n := v1.Count("/mcp/{name}/connect", "", ""); n != 0 {
			t.Fatalf("%d connects on the server that refused the password", n)
		}
	})
}
