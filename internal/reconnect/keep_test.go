package reconnect

import (
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// POST /reconnect with keep (run's --directory handed to the OpenCode 2
// service's daemon) arms the directory as the user's own, "as if given
// with --directory at its start: armed through OpenCode's restarts"
// (statusapi.ReconnectRequest.Keep). The directory run names is usually
// in use already -- the TUI the user just started there, or another one,
// armed it by its session activity. Naming it must make it the user's
// all the same: were it left armed by the event, the service's next
// restart would forget it like any directory nobody named, status would
// never show it as the user's, and only activity in it would arm it
// again.
func TestNamingADirectoryArmedByActivityKeepsItThroughARestart(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, "session.updated"); err != nil { // a client is using it
			t.Fatal(err)
		}
		r.at(5 * time.Second)
		if err := r.eng.Arm(dirA, ArmedByFlag); err != nil { // keep
			t.Fatal(err)
		}
		r.eng.OpenCodeReplaced() // the service restarts
		r.at(10 * time.Second)
		var armedBy []string
		for _, d := range r.eng.Snapshot().Directories {
			if d.Directory == dirA {
				armedBy = append(armedBy, d.ArmedBy)
			}
		}
		if len(armedBy) != 1 || armedBy[0] != ArmedByFlag {
			t.Errorf("a directory kept by run (reconnect keep) while a client had it armed: after OpenCode restarted it is armed by %q, want kept as %q", armedBy, ArmedByFlag)
		}
	})
}

// A directory the user named stays the user's whatever arms it again
// after a disposal, the user's reconnect too: status shows it as named,
// and an OpenCode restart keeps it armed.
func TestNamedDirectoryReArmedByReconnectStaysTheUsers(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		r.at(5 * time.Second)
		r.eng.HandleEvent(opencode.Event{Kind: opencode.KindAllGone, Type: "global.disposed"})
		if _, err := r.eng.Reconnect(dirA, nil); err != nil {
			t.Fatal(err)
		}
		r.at(10 * time.Second)
		r.eng.OpenCodeReplaced()
		r.at(15 * time.Second)
		var armedBy []string
		for _, d := range r.eng.Snapshot().Directories {
			armedBy = append(armedBy, d.ArmedBy)
		}
		if len(armedBy) != 1 || armedBy[0] != ArmedByFlag {
			t.Errorf("a named directory armed again by reconnect after a disposal: after OpenCode restarted, armed by %q, want kept as %q", armedBy, ArmedByFlag)
		}
	})
}
