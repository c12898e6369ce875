package probe

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

const hubURL = "http://mcp.test:8080/mcp"

func (e *endpoint) open() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.held {
		// A pipe whose other end closed fails a zero-deadline read with
		// io.EOF or io.ErrClosedPipe; an open one times out.
		c.SetReadDeadline(time.Now())
		if _, err := c.Read(make([]byte, 1)); err != nil && isTimeout(err) {
			n++
		}
	}
	return n
}

// hubWatches counts the watch goroutines of every Hub that have not
// returned: read from the goroutines themselves, not from the hub's
// bookkeeping, so a goroutine that outlives its watch is counted.
func hubWatches() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "probe.(*Hub).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// watch subscribes to a restart of rawURL's endpoint, closing the
// returned channel when one is told.
func watch(h *Hub, rawURL string) (restarted <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	return ch, h.Watch(rawURL, func() { close(ch) })
}

func isTimeout(err error) bool {
	type timeout interface{ Timeout() bool }
	t, ok := err.(timeout)
	return ok && t.Timeout()
}

// A watch whose subscribers all left ends: its goroutine returns and its
// held connection is closed, without waiting for Close.
func TestHubLastSubscriberEndsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{}
		defer ep.stop()
		p := New(20)
		p.Dial = ep.Dial
		h := NewHub(p, nil)
		defer h.Close()
		_, stop1 := watch(h, hubURL)
		_, stop2 := watch(h, hubURL)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n, open := hubWatches(), ep.open(); n != 1 || open != 1 || ep.count() != 1 {
			t.Fatalf("two subscribers: %d watches, %d connections open, %d dials; want 1, 1, 1", n, open, ep.count())
		}
		stop1()
		synctest.Wait()
		if n := hubWatches(); n != 1 {
			t.Fatalf("one subscriber left: %d watches running, want 1", n)
		}
		stop2()
		stop2() // twice is harmless
		synctest.Wait()
		if n, open := hubWatches(), ep.open(); n != 0 || open != 0 {
			t.Fatalf("no subscriber left: %d watches running, %d connections open; want none", n, open)
		}
	})
}

// Close ends every watch, holding or probing a down endpoint, and waits
// for them; a Watch after Close starts nothing.
func TestHubCloseWaitsForEveryWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up, down := &endpoint{}, &endpoint{refuse: true}
		defer up.stop()
		p := New(20)
		p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == "down.test:80" {
				return down.Dial(ctx, network, addr)
			}
			return up.Dial(ctx, network, addr)
		}
		h := NewHub(p, nil)
		watch(h, hubURL)
		watch(h, "http://other.test:9090/")
		watch(h, "http://down.test/")
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := hubWatches(); n != 3 {
			t.Fatalf("%d watches running, want 3", n)
		}
		h.Close()
		if n, open := hubWatches(), up.open(); n != 0 || open != 0 {
			t.Fatalf("after Close: %d watches running, %d connections open", n, open)
		}
		ch, stop := watch(h, hubURL)
		synctest.Wait()
		if n := hubWatches(); n != 0 {
			t.Fatalf("Watch after Close started %d watches", n)
		}
		select {
		case <-ch:
			t.Fatal("a Watch after Close reported a restart")
		default:
		}
		stop()
	})
}

// A watch that reported a restart tells every subscriber and leaves
// nothing running; a later Watch of the same endpoint starts afresh.
func TestHubRestartLeavesNothingRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{}
		defer ep.stop()
		p := New(20)
		p.Dial = ep.Dial
		h := NewHub(p, nil)
		defer h.Close()
		ch1, stop1 := watch(h, hubURL)
		ch2, stop2 := watch(h, hubURL)
		time.Sleep(time.Minute)
		ep.crash()
		time.Sleep(3 * time.Second)
		ep.set(func(e *endpoint) { e.refuse = false })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		for i, ch := range []<-chan struct{}{ch1, ch2} {
			select {
			case <-ch:
			default:
				t.Fatalf("subscriber %d not told of the restart", i+1)
			}
		}
		if n, open := hubWatches(), ep.open(); n != 0 || open != 0 {
			t.Fatalf("after a restart: %d watches running, %d connections open", n, open)
		}
		stop1()
		stop2()
		dials := ep.count()
		_, stop3 := watch(h, hubURL)
		synctest.Wait()
		if n := hubWatches(); n != 1 || ep.count() != dials+1 {
			t.Fatalf("a new Watch after a restart: %d watches, %d new dials; want 1, 1", n, ep.count()-dials)
		}
		stop3()
		synctest.Wait()
		if n := hubWatches(); n != 0 {
			t.Fatalf("%d watches running after the last stop", n)
		}
	})
}

// Renew dials every watch anew and keeps its subscribers: one watch
// goroutine, one dial more, the connection from before closed (not
// reported as a restart), and the next restart told to every subscriber;
// the last one leaving still ends it. After Close it starts nothing.
func TestHubRenewRedialsAndKeepsSubscribers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{}
		defer ep.stop()
		p := New(20)
		p.Dial = ep.Dial
		h := NewHub(p, nil)
		defer h.Close()
		r1, stop1 := watch(h, hubURL)
		r2, stop2 := watch(h, hubURL)
		time.Sleep(time.Second)
		synctest.Wait()
		h.Renew()
		time.Sleep(time.Second)
		synctest.Wait()
		if n, open, dials := hubWatches(), ep.open(), ep.count(); n != 1 || open != 1 || dials != 2 {
			t.Fatalf("after Renew: %d watches, %d connections open, %d dials; want 1, 1, 2", n, open, dials)
		}
		select {
		case <-r1:
			t.Fatal("Renew was reported as a restart")
		default:
		}
		ep.crash()
		time.Sleep(2 * time.Second)
		ep.set(func(e *endpoint) { e.refuse = false })
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for i, r := range []<-chan struct{}{r1, r2} {
			select {
			case <-r:
			default:
				t.Fatalf("subscriber %d was not told of the restart after Renew", i+1)
			}
		}
		stop1()
		stop2()
		synctest.Wait()
		if n := hubWatches(); n != 0 {
			t.Fatalf("%d watches running after the restart and both left", n)
		}
		_, stop3 := watch(h, hubURL)
		defer stop3()
		h.Close()
		h.Renew()
		synctest.Wait()
		if n := hubWatches(); n != 0 {
			t.Fatalf("Renew after Close started %d watches", n)
		}
	})
}

// However many subscribe to an endpoint's reachability, it is probed by
// one goroutine (one dial a second while down, not one per subscriber);
// each subscriber is told when it answers, once, and when it goes down
// again; the probes end with the last subscriber.
func TestHubReachableIsSharedAndToldOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{refuse: true}
		defer ep.stop()
		p := New(20)
		p.Dial = ep.Dial
		h := NewHub(p, nil)
		defer h.Close()
		var told [2][]bool
		var stops [2]func()
		for i := range told {
			stops[i] = h.Reachable(hubURL, func(up bool) { told[i] = append(told[i], up) })
		}
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if n := ep.count(); n != 10 {
			t.Fatalf("%d dials in 10 s of a down endpoint with two subscribers, want 10", n)
		}
		ep.set(func(e *endpoint) { e.refuse = false })
		time.Sleep(5 * time.Second)
		ep.set(func(e *endpoint) { e.refuse = true })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for i, got := range told {
			if len(got) != 2 || !got[0] || got[1] {
				t.Fatalf("subscriber %d was told %v, want [true false]", i+1, got)
			}
		}
		stops[0]()
		stops[1]()
		synctest.Wait()
		if buf := make([]byte, 1<<20); strings.Contains(string(buf[:runtime.Stack(buf, true)]), "probe.(*Hub).reach(") {
			t.Fatal("the probes run on after the last subscriber left")
		}
	})
}
