package reconnect

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// (A dead child is a crash; rule 4/5: one crash, one
// attempt). On 1.18.34 a crashed stdio server shows failed and OpenCode
// publishes mcp.tools.changed: the engine connects it at once and OpenCode
// spawns a new, working child. The process view scans every 2 s, so it
// usually sees the OLD child gone only after that connect returned, and
// reports ChildExited for the same crash. The engine cannot tell the
// report is about a child its own connect already replaced: the next read
// shows connected, readStart is after deadAt, and deadChild connects
// again, killing the new, healthy child (whose exit the view reports in
// turn: a self-feeding loop on the backoff schedule).
func TestDeadChildReportOfAnAlreadyRepairedCrashIsNoNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		oc.config["s"] = opencode.MCPEntry{Type: "local", Command: []string{"node", "fs.js"}}
		oc.delay["s"] = 400 * time.Millisecond
		oc.after["s"] = "connected"
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.SetProcessView(&tableView{}) // the clock births count in
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second) // connected and stable
		synctest.Wait()

		crash := time.Now()
		oc.set("/p", "s", "failed") // 1.18.34: the child died
		e.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"})
		time.Sleep(time.Second) // the connect (0.4 s) returned; OpenCode spawned a new child
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", crash); len(got) != 1 {
			t.Fatalf("connects after the crash = %v, want one", got)
		}
		// The view's next scan sees the crashed child gone.
		e.ChildExited("/p", "s", birthAt(crash.Add(-80*time.Second)), time.Now()) // the crashed child, started long before
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := oc.connectTimes("/p", "s", crash); len(got) != 1 {
			t.Fatalf("connects for one crash = %v, want one: the late exit report of the replaced child killed the new one", got)
		}
	})
}
