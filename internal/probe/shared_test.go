package probe

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func (p *Prober) recentSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.recent)
}

func refused(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
}

// Results are kept by URL only while they can still be Recent: endpoints
// that come and go do not grow the map. Before the fix it held one entry
// for every URL ever probed (1000 here).
func TestSharedForgetsOldResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(100)
		p.Dial = refused
		most := 0
		for i := range 1000 {
			p.Shared(context.Background(), fmt.Sprintf("http://host%d.test/mcp", i))
			most = max(most, p.recentSize())
			time.Sleep(100 * time.Millisecond)
		}
		// Results younger than Fresh, plus at most one Fresh not yet swept.
		if limit := int(2*Fresh/(100*time.Millisecond)) + 1; most > limit {
			t.Fatalf("recent held %d results at once, want at most %d", most, limit)
		}
		if _, ok := p.Recent("http://host999.test/mcp"); !ok {
			t.Fatal("the latest result was forgotten while still fresh")
		}
	})
}

// Directories sharing an endpoint that probe it at the same moment cost
// one dial, not one each. Before the fix, 10 concurrent callers dialed 10
// times.
func TestSharedDialsOncePerEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(100)
		var dials atomic.Int64
		p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			time.Sleep(200 * time.Millisecond) // a slow SYN-ACK
			return refused(ctx, network, addr)
		}
		var wg sync.WaitGroup
		errs := make([]error, 10)
		for i := range errs {
			wg.Go(func() { errs[i] = p.Shared(context.Background(), "http://slow.test/mcp") })
		}
		wg.Wait()
		if n := dials.Load(); n != 1 {
			t.Fatalf("%d dials for 10 simultaneous probes of one endpoint, want 1", n)
		}
		for i, err := range errs {
			if err == nil {
				t.Fatalf("caller %d: a refused endpoint probed as up", i)
			}
		}
	})
}

// A probe cut short by its caller (its directory was disposed, the daemon
// is stopping) says nothing about the endpoint: it is not shared as a
// failure, and a caller waiting on it probes for itself. Before the fix
// the cancellation stood as the endpoint's result for every directory.
func TestSharedIgnoresCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(100)
		var dials atomic.Int64
		p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			select {
			case <-time.After(200 * time.Millisecond):
				c, s := net.Pipe()
				s.Close()
				return c, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() { first <- p.Shared(ctx, "http://up.test/mcp") }()
		synctest.Wait()
		second := make(chan error, 1)
		go func() { second <- p.Shared(context.Background(), "http://up.test/mcp") }()
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := <-first; err == nil {
			t.Fatal("a cancelled probe reported success")
		}
		if err, ok := p.Recent("http://up.test/mcp"); ok {
			t.Fatalf("a cancelled probe stands as the endpoint's result: %v", err)
		}
		if err := <-second; err != nil {
			t.Fatalf("a caller waiting on a cancelled probe got %v, want the endpoint's own answer", err)
		}
		if err, ok := p.Recent("http://up.test/mcp"); !ok || err != nil {
			t.Fatalf("Recent = %v, %v after a probe that got through", err, ok)
		}
		if n := dials.Load(); n != 2 {
			t.Fatalf("dials = %d, want 2", n)
		}
	})
}
