package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// The grace after a child's exit (announceGrace) waits for OpenCode's
// word, and only for it: on 1.18.34 a killed stdio server is failed and
// announced (mcp.tools.changed) about 0.1 s after the kill, which the
// exit watcher saw within milliseconds; OpenCode 2 announces a change
// (mcp.status.changed). Once OpenCode has spoken, the directory is read
// and the server connected at once, not when the grace is over; a crash
// loop is checked at its episode's time, also without the grace.
func TestSpokenCrashDoesNotWaitForTheGrace(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   opencode.Event
	}{
		{"1.x mcp.tools.changed", opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"}},
		{"2.x mcp.status.changed", opencode.Event{Kind: opencode.KindServerChanged, Type: "mcp.status.changed", Directory: "/p", Server: "s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				oc := newStub()
				oc.set("/p", "s", "connected")
				oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
				oc.after["s"] = "connected"
				e, err := New(noJitter(), oc, Options{})
				if err != nil {
					t.Fatal(err)
				}
				e.SetProcessView(&tableView{})
				_ = e.Arm("/p", ArmedByFlag)
				stop := runEngine(e)
				defer stop()
				time.Sleep(90 * time.Second) // connected and stable
				synctest.Wait()

				// A first crash: the exit is seen at once, OpenCode speaks
				// 100 ms later.
				crash := time.Now()
				e.ChildExited("/p", "s", birthAt(crash.Add(-80*time.Second)), crash)
				time.Sleep(100 * time.Millisecond)
				oc.set("/p", "s", "failed")
				e.HandleEvent(c.ev)
				time.Sleep(time.Second)
				synctest.Wait()
				if got := oc.connectTimes("/p", "s", crash); len(got) != 1 || got[0] != 100*time.Millisecond {
					t.Fatalf("first crash: connects %v after the exit, want one at 100ms, when OpenCode spoke (not after the %v grace)", got, announceGrace)
				}

				// A second crash 5 s later (a crash loop): its episode's
				// next attempt is due 1 s after the first (past by then),
				// so it too is connected when OpenCode speaks.
				time.Sleep(4 * time.Second)
				again := time.Now()
				e.ChildExited("/p", "s", birthAt(crash.Add(200*time.Millisecond)), again)
				time.Sleep(100 * time.Millisecond)
				oc.set("/p", "s", "failed")
				e.HandleEvent(c.ev)
				time.Sleep(3 * time.Second)
				synctest.Wait()
				if got := oc.connectTimes("/p", "s", again)[1:]; len(got) != 1 || got[0] != 100*time.Millisecond {
					t.Fatalf("crash loop: connects %v after the exit, want one at 100ms", got)
				}
			})
		})
	}
}
