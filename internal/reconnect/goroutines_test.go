package reconnect

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"testing/synctest"
	"time"
)

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
