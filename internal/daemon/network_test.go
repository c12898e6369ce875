package daemon

import (
	"context"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/netwatch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// burstNet reports a burst of changes when told to (Wi-Fi joining again
// after a wake), none of which moves the way out; uplink says whether
// the last one of each burst does (a VPN's default route).
type burstNet struct {
	burst  chan int
	uplink bool
}

func (b burstNet) Run(ctx context.Context, changed func(uplink bool)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-b.burst:
			for i := range n {
				changed(b.uplink && i == n-1)
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// messages keeps the log's messages.
type messages struct {
	mu   sync.Mutex
	msgs []string
}

func (m *messages) Enabled(context.Context, slog.Level) bool { return true }
func (m *messages) Handle(_ context.Context, r slog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs = append(m.msgs, r.Message)
	return nil
}
func (m *messages) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m *messages) WithGroup(string) slog.Handler      { return m }
func (m *messages) count(s string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, msg := range m.msgs {
		if msg == s {
			n++
		}
	}
	return n
}

// A jump of the wall clock ahead of the monotonic one (the machine slept)
// and the burst of interface changes after it (Wi-Fi joining again) are
// one network change: the connected remote server's session is renewed
// once (a connect), the connected local one left alone. A second wake
// within max-delay renews nothing yet (charged as a network change).
func TestWallClockJumpIsOneDebouncedChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fakeopencode.New(map[string]fakeopencode.Spec{
			"web": {Type: "remote", URL: "http://remote.test:9000/mcp"},
			"fs":  {},
		})
		fake.Password = "pw"
		fake.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve(host1, fake)
		var skew atomic.Int64 // what the wall clock is ahead by
		wall := func() time.Time { return time.Now().Round(0).Add(time.Duration(skew.Load())) }
		net := burstNet{burst: make(chan int)}
		logs := &messages{}
		start := time.Now()
		cfg := Config{
			Servers:     []Target{{URL: "http://" + host1, Password: "pw", Transport: hosts.Transport()}},
			Directories: []string{"/p"},
			Engine:      reconnect.DefaultConfig, NoProbes: true, NoToasts: true,
			NetSource: net, Wake: netwatch.WakeDetector{Wall: wall},
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(logs)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		sleepUntil := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
		sleepUntil(134900 * time.Millisecond)
		synctest.Wait()
		if n := fake.Count("/mcp/{name}/connect", "/p", ""); n != 0 {
			t.Fatalf("%d connects before the sleep", n)
		}
		skew.Add(int64(10 * time.Minute))     // the machine slept ten minutes
		sleepUntil(135050 * time.Millisecond) // the detector's tick at 135 s saw it
		net.burst <- 5
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if w, c := logs.count("woke from sleep"), logs.count("network changed"); w != 1 || c != 0 {
			t.Fatalf("a wake and a burst of 5 interface changes were %d wakes and %d other changes, want one wake", w, c)
		}
		if n := fake.Count("/mcp/{name}/connect", "/p", "web"); n != 1 {
			t.Fatalf("remote connects after the wake = %d, want one", n)
		}
		if n := fake.Count("/mcp/{name}/connect", "/p", "fs"); n != 0 {
			t.Fatalf("%d connects of the connected local server", n)
		}
		skew.Add(int64(5 * time.Minute)) // slept again, 15 s later
		time.Sleep(16 * time.Second)
		synctest.Wait()
		if w := logs.count("woke from sleep"); w != 2 {
			t.Fatalf("%d wakes seen, want 2", w)
		}
		if n := fake.Count("/mcp/{name}/connect", "/p", "web"); n != 1 {
			t.Fatalf("remote connects after a second wake within max-delay = %d, want still one", n)
		}
	})
}

// A burst of interface changes without a wake that moves the way out (a
// VPN connecting: its tunnel, its address, its default route) is one
// network change, and renews the connected remote server's session as a
// wake does: a VPN may reset every live socket while OpenCode still says
// connected. One beside the way out (a container bridge) renews nothing.
// The local server is left alone.
func TestUplinkChangeRenewsRemoteSessions(t *testing.T) {
	for _, uplink := range []bool{true, false} {
		t.Run(fmt.Sprint("uplink=", uplink), func(t *testing.T) { uplinkChangeRenews(t, uplink) })
	}
}

func uplinkChangeRenews(t *testing.T, uplink bool) {
	synctest.Test(t, func(t *testing.T) {
		fake := fakeopencode.New(map[string]fakeopencode.Spec{
			"web": {Type: "remote", URL: "http://remote.test:9000/mcp"},
			"fs":  {},
		})
		fake.Password = "pw"
		fake.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve(host1, fake)
		net := burstNet{burst: make(chan int), uplink: uplink}
		logs := &messages{}
		cfg := Config{
			Servers:     []Target{{URL: "http://" + host1, Password: "pw", Transport: hosts.Transport()}},
			Directories: []string{"/p"},
			Engine:      reconnect.DefaultConfig, NoProbes: true, NoToasts: true,
			NetSource: net,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(logs)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := fake.Count("/mcp/{name}/connect", "/p", ""); n != 0 {
			t.Fatalf("%d connects before the change", n)
		}
		net.burst <- 4
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if c, w := logs.count("network changed"), logs.count("woke from sleep"); c != 1 || w != 0 {
			t.Fatalf("a burst of 4 interface changes was %d changes and %d wakes, want one change", c, w)
		}
		if n, want := fake.Count("/mcp/{name}/connect", "/p", "web"), map[bool]int{true: 1}[uplink]; n != want {
			t.Fatalf("remote connects after the change = %d, want %d", n, want)
		}
		if n := fake.Count("/mcp/{name}/connect", "/p", "fs"); n != 0 {
			t.Fatalf("%d connects of the connected local server", n)
		}
	})
}
