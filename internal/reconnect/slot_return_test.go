package reconnect

import (
	"testing"
	"time"
)

// Budget slots and directories that end. A slot is held only by a connect
// in flight: a directory that waits for one holds nothing, and one that
// ends (disposed, disarmed) while its connect is in flight gets the slot
// back when the connect returns. A slot lost any other way is lost for
// the daemon's lifetime, and with --max-concurrent 1 every connect of
// every directory stops.

// holdAll takes every slot of the budget for the test through b (a share
// of another engine, whose connects hold them), so directories wait.
func holdAll(t *testing.T, b *Share, n int) {
	t.Helper()
	for range n {
		if !b.TryTake(false) {
			t.Fatal("budget has fewer free slots than it should")
		}
	}
}

// allFree reports whether all n slots of the budget are free to b (a
// share of it), leaving them free.
func allFree(b *Share, n int) bool {
	got := 0
	for range n {
		if b.TryTake(false) {
			got++
		}
	}
	for range got {
		b.Release(false)
	}
	return got == n
}

// A directory disposed while it waits for a slot is never read again: the
// slot freed next goes to the directory that still waits, at once, and
// nothing stays taken.
func TestDisposedDirectoryWaitingForASlotIsNeverReadAgain(t *testing.T) {
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
		if !r.server(dirA, "f").WaitingForSlot || !r.server("/b", "f").WaitingForSlot {
			t.Fatalf("%+v %+v: the test wants both directories waiting", r.server(dirA, "f"), r.server("/b", "f"))
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
		reads := fake.Count(routeStatus, dirA, "")
		other.Release(false)
		r.at(2*time.Second + 20*time.Millisecond)
		if got := r.connectTimes("/b", "f"); len(got) != 1 {
			t.Fatalf("/b connects = %v, want one as soon as the slot was freed", got)
		}
		r.at(time.Minute)
		if n := fake.Count(routeStatus, dirA, "") - reads; n != 0 || len(r.connectTimes(dirA, "f")) != 0 {
			t.Fatalf("the disposed directory was read %d times or connected after the dispose", n)
		}
		if !allFree(other, 1) {
			t.Fatal("a slot stayed taken after the connect returned")
		}
	})
}

// A directory disarmed while its connect is in flight gets its slot back
// when the connect returns.
func TestDirectoryDisarmedDuringItsConnectReturnsTheSlot(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		fake := g.new(map[string]Spec{"f": {Status: "failed", ConnectDelay: 5 * time.Second}})
		r := newRig(t, fake, noJitter(), b)
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second)
		if allFree(r.eng.budget, 1) || len(r.connectTimes(dirA, "f")) != 1 {
			t.Fatal("the test wants the directory's connect in flight")
		}
		r.eng.Disarm(dirA, "test")
		r.at(10 * time.Second)
		if !allFree(r.eng.budget, 1) {
			t.Fatal("the slot of the disarmed directory's connect is lost")
		}
	})
}

// A directory woken by a freed slot whose fresh read needs no connect (the
// server came back meanwhile) takes no slot, and passes the wake on to the
// directory waiting behind it; so does one disarmed before its check.
func TestSlotNotNeededByTheCheckGoesToTheNextWaiting(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		b := NewBudget(1)
		other := b.Share() // another engine's
		holdAll(t, other, 1)
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), b)
		_ = r.eng.Arm(dirA, "test")
		r.at(100 * time.Millisecond)
		_ = r.eng.Arm("/b", "test")
		r.at(2 * time.Second)
		if !r.server(dirA, "f").WaitingForSlot || !r.server("/b", "f").WaitingForSlot {
			t.Fatal("the test wants both directories waiting for a slot, A first")
		}
		fake.SetStatus(dirA, "f", "connected", "")
		other.Release(false)
		r.at(2*time.Second + 10*time.Millisecond)
		if s := r.server(dirA, "f"); s.Status != "connected" || s.WaitingForSlot || len(r.connectTimes(dirA, "f")) != 0 {
			t.Fatalf("%+v: the test wants the check that used no slot", s)
		}
		if got := r.connectTimes("/b", "f"); len(got) != 1 {
			t.Fatalf("/b connects = %v, want one as soon as A passed the slot on", got)
		}
		r.at(time.Minute)
		if !allFree(other, 1) {
			t.Fatal("a slot stayed taken")
		}
	})
}
