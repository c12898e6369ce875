package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// A reconnect that arrives before the engine runs (the status API serves
// while the daemon detects OpenCode) keeps a --directory directory's
// standing: it stays armed through OpenCode restarts, not demoted to an
// ordinary armed directory forgotten at the next restart.
func TestReconnectBeforeRunKeepsDirectoryFlag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Arm("/p", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reconnect("/p", nil); err != nil { // the status API, during detection
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		e.OpenCodeReplaced() // OpenCode restarted
		time.Sleep(2 * time.Second)
		synctest.Wait()
		snap := e.Snapshot()
		if len(snap.Directories) != 1 || snap.Directories[0].ArmedBy != ArmedByFlag {
			t.Fatalf("after an OpenCode restart the --directory is %+v, want it armed by %s", snap.Directories, ArmedByFlag)
		}
	})
}

// A --directory directory disposed by OpenCode and armed again by a
// client's activity is still the user's: the next OpenCode restart keeps
// it.
func TestDirectoryFlagKeepsStandingAfterADisposal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(2 * time.Second)
		e.HandleEvent(opencode.Event{Kind: opencode.KindInstanceGone, Type: "server.instance.disposed", Directory: "/p"})
		time.Sleep(time.Minute)
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.updated", Directory: "/p"})
		time.Sleep(2 * time.Second)
		e.OpenCodeReplaced()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		snap := e.Snapshot()
		if len(snap.Directories) != 1 || snap.Directories[0].ArmedBy != ArmedByFlag {
			t.Fatalf("after a disposal, activity and an OpenCode restart the --directory is %+v, want it armed by %s", snap.Directories, ArmedByFlag)
		}
	})
}
