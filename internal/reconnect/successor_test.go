package reconnect

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// tableView is a process table as the engine's ProcessView sees it: the
// birth of the process serving each server now, on a clock of ticks of
// the (fake) wall clock (birthAt).
type tableView struct {
	mu      sync.Mutex
	serving map[[2]string]uint64
	asked   int
}

// birthAt is the birth of a process started at t, on tableView's clock.
func birthAt(t time.Time) uint64 { return uint64(t.UnixMilli() / 10) }

func (v *tableView) set(dir, name string, started time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.serving == nil {
		v.serving = map[[2]string]uint64{}
	}
	v.serving[[2]string{dir, name}] = birthAt(started)
}

func (v *tableView) Look() {}

func (v *tableView) Clock() uint64 { return birthAt(time.Now()) }

func (v *tableView) Successor(dir, name string, birth uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked++
	b, ok := v.serving[[2]string{dir, name}]
	return ok && b > birth
}

// A server OpenCode started again by itself (a config reload, another
// client's connect) is not connected once more: the decision asks the
// process table as it is when the check reads status, so a successor
// that the view's next scan (seconds later) would report is seen already.
func TestSuccessorSeenAtDecisionTimeIsNotReconnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		view := &tableView{}
		e.SetProcessView(view)
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()
		first := time.Now().Add(-time.Minute)
		exited := time.Now()
		// The old child is gone; OpenCode has started its successor
		// already, which only a later scan would report.
		view.set("/p", "s", exited.Add(5*time.Millisecond))
		e.ChildExited("/p", "s", birthAt(first), exited)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", exited); len(got) != 0 {
			t.Fatalf("a server OpenCode had already started again (status connected, its successor in the process table) was connected again at %v", got)
		}
		if view.asked == 0 {
			t.Fatal("the process table was never asked")
		}
	})
}

// Without a successor the dead child is repaired, as before: the
// process view's answer is what decides.
func TestDeadChildWithoutASuccessorIsReconnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		view := &tableView{}
		view.set("/p", "s", time.Now()) // the first child, which then exits
		e.SetProcessView(view)
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		exited := time.Now()
		e.ChildExited("/p", "s", birthAt(exited.Add(-80*time.Second)), exited)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", exited); len(got) != 1 || got[0] != announceGrace {
			t.Fatalf("connects after a dead child with no successor = %v, want one after %v", got, announceGrace)
		}
	})
}
