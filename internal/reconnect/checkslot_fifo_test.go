package reconnect

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// prefixSlowOC answers the status reads of directories under slow after
// delay, every other call at once.
type prefixSlowOC struct {
	*ocStub
	slow  string
	delay time.Duration
}

func (o *prefixSlowOC) MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error) {
	if strings.HasPrefix(dir, o.slow) {
		t := time.NewTimer(o.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return o.ocStub.MCPStatus(ctx, dir)
}

// A directory due for a check while every check slot is taken waits in
// the scheduler's heap; a directory whose own check ends with it due again
// (a wake arrived during the check, rule 7) takes the slot it just gave
// back before the scheduler can hand it to the heap. With 32 directories
// whose checks are each woken by an event (a crash report of a server
// that was connected: checked at once, rule 4) while a slow OpenCode
// answers them, a 33rd directory that has been due since 1.5 s is never
// checked: the busy ones take turns with themselves. Before 840add8 it
// waited in the slot channel's queue of senders, first in line, and was
// read at the end of the first round (about 11 s). On one processor (what
// the daemon runs on since 3163378) the check that gives its slot back
// runs on to its next check before the kicked scheduler runs at all, so
// the busy directories win every time; on more it is a race they win
// now and then (the /cold directory was read after 80 s in some runs).
func TestADirectoryWaitingForACheckSlotIsNotOvertakenByBusyOnes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		oc := &prefixSlowOC{ocStub: newStub(), slow: "/hot/", delay: 10 * time.Second}
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		var hot []string
		for i := range maxChecks {
			d := fmt.Sprintf("/hot/%02d", i)
			hot = append(hot, d)
			oc.set(d, "s", "connected")
			if err := e.Arm(d, ArmedByFlag); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
		oc.set("/cold", "s", "connected")
		if err := e.Arm("/cold", ArmedByFlag); err != nil { // due at 1.5 s, behind the 32 due at 1 s
			t.Fatal(err)
		}
		start := time.Now()
		for time.Since(start) < 2*time.Minute {
			time.Sleep(5 * time.Second) // mid-check for the hot directories
			for _, d := range hot {
				e.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: d, Server: "s"})
			}
		}
		synctest.Wait()
		reads := oc.statusTimes("/cold", start)
		if len(reads) == 0 || reads[0] > 30*time.Second {
			t.Fatalf("/cold, due 1 s after the start, was read at %v (want its first read by the end of the first round, ~11 s) while %d busy directories were read %d times", reads, len(hot), oc.count("status", "")-len(reads))
		}
	})
}

func (o *ocStub) statusTimes(dir string, since time.Time) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Duration
	for _, c := range o.calls {
		if c.op == "status" && c.dir == dir {
			out = append(out, c.at.Sub(since))
		}
	}
	return out
}
