package reconnect

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// Rule 7 says a check connects only what its fresh read shows
// failed (the restart repair aside, which needs a restart seen by the
// watch). When a probe-triggered attempt of a failed remote server finds
// no budget slot, connect keeps the trigger as trigOf(Extra) =
// trigProbe|trigRestart: it invents a restart. If the read that a freed
// slot causes shows the server connected (the user connected it, another
// client did), the invented restart fires and the healthy server is
// connected again (a new session; for OpenCode a stop and start).
func TestSlotWaitOfProbeAttemptDoesNotReconnectConnectedServer(t *testing.T) {
	e, err := New(noJitter(), nil, Options{Budget: NewBudget(1)})
	if err != nil {
		t.Fatal(err)
	}
	if !e.budget.TryTake(true) { // another directory's connect holds the slot
		t.Fatal("budget full")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now()
	d := newDir("/p", "test", now, cancel)
	d.config = dirConfig{"r": {kind: "remote", url: "http://127.0.0.1:1/mcp"}}
	d.servers["r"] = &server{status: opencode.StatusFailed}

	// The endpoint answered again: the reconcile decided a probe attempt,
	// and connect found no free slot.
	e.connect(ctx, d, []attempt{{"r", backoff.Extra, trigProbe}})
	if c := d.servers["r"]; c.connecting || !c.slotWait {
		t.Fatalf("server state %+v, want waiting for a slot", *c)
	}

	// The slot's read shows it connected.
	e.mu.Lock()
	connects, _, _ := e.reconcile(d, map[string]opencode.ServerStatus{"r": {Status: opencode.StatusConnected}}, now.Add(time.Second))
	e.mu.Unlock()
	if len(connects) != 0 {
		t.Errorf("a read showing %q connected decided connects %v: a probe's slot wait became a restart repair", "r", connects)
	}
}
