package reconnect

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkIdleCheck is the engine's own part of an idle check of ten
// servers (a read that changes nothing), without HTTP.
func BenchmarkIdleCheck(b *testing.B) {
	e, err := New(noJitter(), newSteadyOC(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := newDir("/p", ArmedByFlag, time.Now(), cancel)
	e.mu.Lock()
	e.dirs[d.path] = d
	e.mu.Unlock()
	var work sync.WaitGroup
	for range 3 {
		e.check(ctx, d, &work)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.check(ctx, d, &work)
	}
	work.Wait()
}
