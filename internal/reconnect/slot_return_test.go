package reconnect

import (
	"testing"
	"testing/synctest"
	"time"
)

// Budget slots and directories that end. A directory waiting in line for
// a connect slot, or holding one the budget handed it, must give it back
// when it ends (disposed, disarmed) or no longer needs it: a slot lost
// this way is lost for the daemon's lifetime, and with --max-concurrent 1
// every connect of every directory stops.

// holdAll takes every slot of the budget for the test through b (a share
// of another engine, whose connects hold them), so directories wait in
// line.
func holdAll(t *testing.T, b *Share, n int) {
	t.Helper()
	for range n {
		if !tryAcquire(b, false) {
			t.Fatal("budget has fewer free slots than it should")
		}
	}
}

// allFree reports whether all n slots of the budget are free to b (a
// share of it), leaving them free.
func allFree(b *Share, n int) bool {
	got := 0
	for range n {
		if tryAcquire(b, false) {
			got++
		}
	}
	for range got {
		b.Release(false)
	}
	return got == n
}

func dirOf(r *rig, path string) *dir {
	r.eng.mu.Lock()
	defer r.eng.mu.Unlock()
	return r.eng.dirs[path]
}

func inLine(b *Budget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.line)
}

// A directory disposed while it waits in line leaves the line at once:
// the slot freed next goes to the directory behind it, the disposed one
// is never read again, and nothing stays taken.
func TestDisposedDirectoryLeavesTheLine(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		other := b.Share() // another engine's
		holdAll(t, other, 1)
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), b)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		_ = r.eng.Arm("/b", "test")
		r.at(2 * time.Second)
		if !r.server(dirA, "f").WaitingForSlot || !r.server("/b", "f").WaitingForSlot || inLine(b) != 2 {
			t.Fatalf("%+v %+v, %d in line: the test wants both directories waiting", r.server(dirA, "f"), r.server("/b", "f"), inLine(b))
		}
		if noShutdownEvent(fake) {
			r.eng.Disarm(dirA, "disposed") // what its next check would do (locations.go)
		} else {
			fake.Dispose(dirA)
		}
		r.at(2*time.Second + 10*time.Millisecond)
		if len(r.eng.Snapshot().Directories) != 1 {
			t.Fatalf("%+v: the disposed directory is still armed", r.eng.Snapshot().Directories)
		}
		if n := inLine(b); n != 1 {
			t.Fatalf("%d waiting in line after the dispose, want only /b", n)
		}
		reads := fake.Count(routeStatus, dirA, "")
		other.Release(false)
		r.at(2*time.Second + 20*time.Millisecond)
		if got := r.connectTimes("/b", "f"); len(got) != 1 {
			t.Fatalf("/b connects = %v, want one as soon as the slot was freed", got)
		}
		if n := fake.Count(routeStatus, dirA, "") - reads; n != 0 || len(r.connectTimes(dirA, "f")) != 0 {
			t.Fatalf("the disposed directory was read %d times or connected after the dispose", n)
		}
		if !allFree(other, 1) {
			t.Fatal("a slot stayed taken after the connect returned")
		}
	})
}

// The budget may hand a slot to a directory in line at the moment it
// ends: the waiter was out of line already, so the end could not cancel
// it, and the grant arrives after. The grant gives the slot straight back.
func TestGrantAfterTheDirectoryEndedIsReturned(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		other := b.Share() // another engine's
		holdAll(t, other, 1)
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), b)
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second)
		d := dirOf(r, dirA)
		if d == nil || !r.server(dirA, "f").WaitingForSlot {
			t.Fatal("the test wants the directory waiting in line")
		}
		r.eng.Disarm(dirA, "test")
		synctest.Wait()
		other.Release(false)
		// What Release does for a waiter it took out of line before the
		// directory ended: the slot is taken for the engine's share, then
		// the grant runs.
		if !tryAcquire(r.eng.budget, false) {
			t.Fatal("no free slot to hand over")
		}
		r.eng.granted(d, 0)
		r.eng.mu.Lock()
		held := d.held
		r.eng.mu.Unlock()
		if held != [2]int{} || !allFree(other, 1) {
			t.Fatalf("held %v by an ended directory; the slot is lost", held)
		}
	})
}

// A directory that ends holding a slot handed to it (granted, its check
// not yet run) gives the slot back.
func TestDirectoryThatEndsHoldingASlotReturnsIt(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		fake := g.new(map[string]Spec{"f": {}})
		r := newRig(t, fake, noJitter(), b)
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second) // checked; the next check is an idle interval away
		d := dirOf(r, dirA)
		// The state a grant leaves, without its wake-up, so the
		// directory ends before the check that would have used it.
		if !tryAcquire(r.eng.budget, false) {
			t.Fatal("no free slot")
		}
		r.eng.mu.Lock()
		d.held[0]++
		r.eng.mu.Unlock()
		r.eng.Disarm(dirA, "test")
		synctest.Wait()
		if !allFree(r.eng.budget, 1) {
			t.Fatal("the slot the ended directory held is lost")
		}
	})
}

// A slot handed to a waiting directory whose fresh read then needs no
// connect (the server came back meanwhile) goes back after that check,
// not when the directory ends: another directory waits for it.
func TestSlotNotNeededByTheCheckIsReturned(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		other := b.Share() // another engine's
		holdAll(t, other, 1)
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), b)
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second)
		if !r.server(dirA, "f").WaitingForSlot {
			t.Fatal("the test wants the directory waiting in line")
		}
		fake.SetStatus(dirA, "f", "connected", "")
		other.Release(false)
		r.at(2*time.Second + 10*time.Millisecond)
		if s := r.server(dirA, "f"); s.Status != "connected" || len(r.connectTimes(dirA, "f")) != 0 {
			t.Fatalf("%+v: the test wants the check that used no slot", s)
		}
		if !allFree(other, 1) {
			t.Fatal("the directory keeps a slot its check did not use")
		}
	})
}
