package reconnect

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The engine's queue on its own: keys come out first come first served,
// an added time never moves a key later, a key added while a worker holds
// it comes out again once that worker is done (never to a second worker
// meanwhile), a forgotten key never comes out again, and shutting the
// queue down wakes every waiting worker.
func TestQueueHandsOutEachKeyOnceInTheOrderItCameDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := New(noJitter(), nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() { e.delays(ctx) })
		q := e.q
		var got []string
		get := func() string {
			e.mu.Lock()
			defer e.mu.Unlock()
			k, ok := q.get()
			if !ok {
				t.Fatal("the queue shut down")
			}
			got = append(got, k)
			return k
		}
		now := time.Now()
		e.mu.Lock()
		q.addAt("/late", now.Add(3*time.Second))
		q.addAt("/late", now.Add(5*time.Second)) // never later: 3 s stands
		q.addAt("/b", now.Add(2*time.Second))
		q.addAt("/a", now.Add(time.Second))
		q.addAt("/gone", now.Add(time.Second))
		q.forget("/gone")
		e.mu.Unlock()
		if k := get(); k != "/a" || time.Since(now) != time.Second {
			t.Fatalf("first key %s at %v, want /a at 1s", k, time.Since(now))
		}
		// /a is held: added again, it waits for done, not for a second worker.
		e.mu.Lock()
		q.add("/a")
		e.mu.Unlock()
		if k := get(); k != "/b" {
			t.Fatalf("while /a is held got %s, want /b", k)
		}
		e.mu.Lock()
		q.done("/a")
		q.add("/b")
		q.forget("/b") // held and added again: done does not hand it out
		q.done("/b")
		e.mu.Unlock()
		get()
		get()
		if want := []string{"/a", "/b", "/a", "/late"}; !slices.Equal(got, want) || time.Since(now) != 3*time.Second {
			t.Fatalf("keys %v by %v, want %v by 3s", got, time.Since(now), want)
		}
		done := make(chan bool)
		go func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			_, ok := q.get()
			done <- ok
		}()
		synctest.Wait()
		cancel()
		if <-done {
			t.Fatal("a worker waiting when the queue shut down got a key")
		}
	})
}
