package reconnect

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// A failed remote server's endpoint is probed (about once a second)
// without a check slot, while every slot is taken and other directories
// wait for one. Here /probe's
// connect of r is in flight (60 s), so its next check is the idle one;
// from 2.5 s, 33 directories are due and the slow OpenCode (10 s a read)
// holds all 32 slots until 12.5 s: /probe's endpoint is probed about once
// a second all along.
func TestProbesRunWhileEveryCheckSlotIsTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{}
		oc := &prefixSlowOC{ocStub: newStub(), slow: "/hot/", delay: 10 * time.Second}
		oc.config["r"] = opencode.MCPEntry{Type: "remote", URL: "http://r.test:9000/mcp"}
		oc.ocStub.delay["r"] = time.Minute
		oc.set("/probe", "r", "failed")
		e, err := New(noJitter(), oc, Options{Prober: newTestProber(ep)})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		start := time.Now()
		if err := e.Arm("/probe", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		for i := range maxChecks + 1 {
			d := fmt.Sprintf("/hot/%02d", i)
			oc.set(d, "s", "connected")
			if err := e.Arm(d, ArmedByFlag); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3*time.Second - time.Since(start))
		before := ep.dials.Load()
		time.Sleep(12*time.Second - time.Since(start))
		if n := ep.dials.Load() - before; n < 5 {
			t.Fatalf("/probe's failed remote endpoint was probed %d times between 3 s and 12 s (every check slot taken, a directory due for a check waiting), want about once a second", n)
		}
	})
}
