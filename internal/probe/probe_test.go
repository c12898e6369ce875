package probe

import (
	"context"
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestTarget(t *testing.T) {
	cases := map[string]string{
		"http://127.0.0.1:8080/mcp": "127.0.0.1:8080",
		"https://example.test/mcp":  "example.test:443",
		"http://[::1]/x":            "[::1]:80",
	}
	for in, want := range cases {
		got, _, err := Target(in)
		if err != nil || got != want {
			t.Errorf("Target(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "stdio", "ftp://x/", "http://"} {
		if _, _, err := Target(bad); err == nil {
			t.Errorf("Target(%q) accepted", bad)
		}
	}
}

func TestProbeRealEndpoints(t *testing.T) {
	p := New(100)
	srv := httptest.NewServer(nil)
	if err := p.Probe(context.Background(), srv.URL+"/mcp"); err != nil {
		t.Fatalf("an open http endpoint: %v", err)
	}
	tlsSrv := httptest.NewTLSServer(nil)
	defer tlsSrv.Close()
	if err := p.Probe(context.Background(), tlsSrv.URL+"/mcp"); err != nil {
		t.Fatalf("an open https endpoint: %v", err)
	}
	url := srv.URL
	srv.Close()
	if err := p.Probe(context.Background(), url); err == nil {
		t.Fatal("a closed endpoint probed as reachable")
	}
	// A plain TCP listener is not a TLS server: https fails the handshake.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			c.Close()
		}
	}()
	if err := p.Probe(context.Background(), "https://"+l.Addr().String()+"/"); err == nil {
		t.Fatal("a non-TLS endpoint passed an https probe")
	}
}

func TestInterval(t *testing.T) {
	for down, want := range map[time.Duration]time.Duration{
		0: time.Second, 30 * time.Second: time.Second, time.Minute: time.Second,
		90 * time.Second: 1500 * time.Millisecond, 3 * time.Minute: 2250 * time.Millisecond, time.Hour: 30 * time.Second,
	} {
		if got := Interval(down); got != want {
			t.Errorf("Interval(%v) = %v, want %v", down, got, want)
		}
	}
}

func TestRateBound(t *testing.T) {
	p := New(5)
	n := 0
	for range 100 {
		if p.limit.Allow() {
			n++
		}
	}
	if n > 6 {
		t.Fatalf("%d probes allowed at once with a rate of 5/s", n)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// One held connection per endpoint, whatever the subscribers; the watch
// ends with its last subscriber.
func TestHubSharesAndStops(t *testing.T) {
	srv := httptest.NewServer(nil)
	defer srv.Close()
	var dials atomic.Int64
	p := New(100)
	d := &net.Dialer{}
	p.Dial = func(ctx context.Context, n, a string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, n, a)
	}
	h := NewHub(p, nil)
	_, stop1 := watch(h, srv.URL)
	_, stop2 := watch(h, srv.URL)
	deadline := time.Now().Add(5 * time.Second)
	for dials.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := dials.Load(); n != 1 {
		t.Fatalf("dials = %d, want 1 for two subscribers", n)
	}
	stop1()
	stop2()
	stop2() // twice is harmless
	h.Close()
}
