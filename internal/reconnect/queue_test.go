package reconnect

import (
	"bytes"
	"context"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
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

// prefixSlowOC answers the status reads of directories under slow after
// delay, every other call at once.
type prefixSlowOC struct {
	*ocStub
	slow  string
	delay time.Duration
}

func (o *prefixSlowOC) MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error) {
	if strings.HasPrefix(dir, o.slow) {
		t := time.NewTimer(o.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return o.ocStub.MCPStatus(ctx, dir)
}

// Check slots go first come first served: a directory due for a check
// while every slot is taken waits its turn, and a directory whose own
// check ends with it due again (a wake arrived during the check, rule 7)
// does not take the slot it just gave back ahead of it. With 32
// directories whose checks are each woken by an event (a crash report of
// a server that was connected: checked at once, rule 4) while a slow
// OpenCode answers them, a 33rd directory due since 1.5 s is read at the
// end of the first round (about 11 s), not never. On one processor (what
// the daemon runs on) a check that gives its slot back would otherwise
// run on to its next check before anything else runs at all.
func TestADirectoryWaitingForACheckSlotIsNotOvertakenByBusyOnes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		oc := &prefixSlowOC{ocStub: newStub(), slow: "/hot/", delay: 10 * time.Second}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		var hot []string
		for i := range maxChecks {
			d := fmt.Sprintf("/hot/%02d", i)
			hot = append(hot, d)
			oc.set(d, "s", "connected")
			if err := e.Arm(d, ArmedByFlag); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
		oc.set("/cold", "s", "connected")
		if err := e.Arm("/cold", ArmedByFlag); err != nil { // due at 1.5 s, behind the 32 due at 1 s
			t.Fatal(err)
		}
		start := time.Now()
		for time.Since(start) < 2*time.Minute {
			time.Sleep(5 * time.Second) // mid-check for the hot directories
			for _, d := range hot {
				e.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: d, Server: "s"})
			}
		}
		synctest.Wait()
		reads := oc.statusTimes("/cold", start)
		if len(reads) == 0 || reads[0] > 30*time.Second {
			t.Fatalf("/cold, due 1 s after the start, was read at %v (want its first read by the end of the first round, ~11 s) while %d busy directories were read %d times", reads, len(hot), oc.count("status", "")-len(reads))
		}
	})
}

func (o *ocStub) statusTimes(dir string, since time.Time) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Duration
	for _, c := range o.calls {
		if c.op == "status" && c.dir == dir {
			out = append(out, c.at.Sub(since))
		}
	}
	return out
}

// A directory has no goroutine of its own (queue.go): with many armed
// directories idle between checks, the engine runs a constant handful of
// goroutines, not one per directory (a goroutine per directory costs a
// thousand stacks and timers at scale).
func TestIdleDirectoriesCostNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		specs := map[string]Spec{}
		for i := range 10 {
			specs[fmt.Sprintf("s%d", i)] = Spec{}
		}
		r := newRig(t, generations[0].new(specs), noJitter(), nil)
		before, all := engineGoroutines(), runtime.NumGoroutine()
		const dirs = 200
		for i := range dirs {
			_ = r.eng.Arm(fmt.Sprintf("/p/%d", i), "test")
		}
		r.at(time.Minute) // the first checks (1 s) and one idle check (31 s) are done
		after := engineGoroutines()
		t.Logf("the engine runs %d goroutines before arming %d directories, %d once they are idle (all goroutines: %d, then %d)",
			before, dirs, after, all, runtime.NumGoroutine())
		if after-before > dirs/10 {
			t.Fatalf("%d armed idle directories run %d more goroutines of the engine, want a constant handful", dirs, after-before)
		}
		for i := range dirs {
			if s := r.server(fmt.Sprintf("/p/%d", i), "s0"); s.Status != "connected" {
				t.Fatalf("/p/%d: s0 is %q, want connected: the directory was never checked", i, s.Status)
			}
		}
	})
}

// engineGoroutines counts the goroutines running the engine's code. (All
// goroutines would count the fake's pool of idle HTTP connections too,
// three goroutines each, which fills up as it likes.)
func engineGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("internal/reconnect.(*Engine)")) {
			n++
		}
	}
	return n
}

// The idle checks of many directories run on the engine's workers, one
// turn after another, not a goroutine each: a check's goroutine grows its
// stack in the HTTP client, and a fresh goroutine per check paid for that
// growth every time (a tenth of the daemon's idle CPU at scale).
func TestIdleChecksReuseTheirGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := New(DefaultConfig, newSteadyOC(), Options{}) // jittered: spread over the idle grid, as at scale
		if err != nil {
			t.Fatal(err)
		}
		const dirs = 100
		for i := range dirs {
			_ = e.Arm(fmt.Sprintf("/p/%d", i), ArmedByFlag)
		}
		stop := runEngine(e)
		defer stop()
		time.Sleep(2 * time.Minute) // armed, checked, idle
		synctest.Wait()
		created := func() uint64 {
			s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
			metrics.Read(s)
			return s[0].Value.Uint64()
		}
		before := created()
		time.Sleep(5 * time.Minute) // ten idle checks of each directory
		synctest.Wait()
		n := created() - before
		t.Logf("%d goroutines created for %d idle checks", n, dirs*10)
		if n > dirs/2 {
			t.Fatalf("%d goroutines created for %d idle checks, want a few workers", n, dirs*10)
		}
	})
}

// Directories due for a check while every check slot is taken wait in the
// engine's queue, in the order they came due, not as goroutines queued
// for a slot: a thousand directories armed at once (--directory, a
// re-subscribed stream) cost the engine a goroutine per slot, not one
// each, and every one of them is still checked.
func TestDirectoriesWaitingForACheckSlotCostNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, oc := slowEngine(t)
		before := engineGoroutines()
		const n = 10 * maxChecks
		dirs := armConnected(t, e, oc, n)
		time.Sleep(5 * time.Second) // the first checks hold every slot, waiting for OpenCode
		synctest.Wait()
		if running := engineGoroutines() - before; running > maxChecks+maxChecks/4 {
			t.Fatalf("%d directories due with %d check slots: the engine runs %d goroutines more, want about one per slot", n, maxChecks, running)
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		for _, d := range dirs {
			if oc.count("status", d) == 0 {
				t.Fatalf("%s was never read", d)
			}
		}
	})
}
