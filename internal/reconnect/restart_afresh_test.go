package reconnect

import (
	"testing"
	"time"
)

// A --directory directory survives an OpenCode restart, but not with
// everything it knew about the old process: its servers' episodes
// (attempt counters, slow tier) and its config (kinds and endpoint URLs)
// start afresh. The new OpenCode is a new process with fresh MCP
// connections, often restarted because the config changed. A server that
// was in the slow tier before the restart and is failed in the new
// process (the very case the tool exists for: a server not up when
// OpenCode started) must not wait for the old slow-tier slot (minutes)
// instead of the fast episode (1, 2, 4, 8, 16 s) a directory armed afresh gets.
func TestDirectoryFlagStartsAfreshAfterOpenCodeRestart(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"late": {Status: "failed", Error: "Connection closed"}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		r.at(60 * time.Second) // fast episode spent: slow tier
		before := fake.Count(routeConnect, dirA, "late")
		// OpenCode restarts (the stream comes back from a new process); the
		// server is failed in the new process too, and comes up 3 s later.
		r.eng.OpenCodeReplaced()
		fake.SetAfterConnect(dirA, "late", "connected")
		r.at(60*time.Second + 30*time.Second)
		if n := fake.Count(routeConnect, dirA, "late") - before; n == 0 {
			t.Fatalf("no connect of a failed server in the 30 s after OpenCode restarted: the --directory directory kept its old slow-tier counter (%+v)", r.server(dirA, "late"))
		}
	})
}
