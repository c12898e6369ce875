package reconnect

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// steadyOC answers every read with the same ten servers, nine connected
// and one disabled, without allocating: what the engine itself costs.
type steadyOC struct {
	status map[string]opencode.ServerStatus
	config map[string]opencode.MCPEntry
}

func newSteadyOC() *steadyOC {
	o := &steadyOC{status: map[string]opencode.ServerStatus{}, config: map[string]opencode.MCPEntry{}}
	for i := range 9 {
		name := fmt.Sprintf("s%d", i)
		o.status[name] = opencode.ServerStatus{Status: opencode.StatusConnected}
		o.config[name] = opencode.MCPEntry{Type: "local", Command: []string{"node", name + ".js"}}
	}
	o.status["off"] = opencode.ServerStatus{Status: opencode.StatusDisabled}
	o.config["off"] = opencode.MCPEntry{Type: "remote", URL: "http://127.0.0.1:1/mcp"}
	return o
}

func (o *steadyOC) MCPStatus(context.Context, string) (map[string]opencode.ServerStatus, error) {
	return o.status, nil
}
func (o *steadyOC) Connect(context.Context, string, string) error { return nil }
func (o *steadyOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	return o.config, nil
}

// An idle check of a directory whose ten servers are all as they should
// be (the check a thousand armed directories make every 30 s) costs a
// bounded handful of allocations: no per-server copy of a name, a status
// or a map, whatever the read holds.
func TestIdleCheckAllocatesLittle(t *testing.T) {
	e, ctx, d := idleChecked(t)
	allocs := testing.AllocsPerRun(200, func() { e.check(ctx, d) })
	t.Logf("%.1f allocations per idle check of ten servers", allocs)
	if allocs > maxIdleCheckAllocs {
		t.Errorf("%.0f allocations per idle check of ten servers, want at most %d", allocs, maxIdleCheckAllocs)
	}
}

// idleChecked is an engine over steadyOC and one directory in it, checked
// three times (the first learns the kinds): what an idle check then costs
// is the engine's own.
func idleChecked(tb testing.TB) (*Engine, context.Context, *dir) {
	tb.Helper()
	e, err := New(noJitter(), newSteadyOC(), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	d := newDir("/p", ArmedByFlag, time.Now(), cancel)
	e.mu.Lock()
	e.dirs[d.path] = d
	e.mu.Unlock()
	for range 3 {
		e.check(ctx, d)
	}
	return e, ctx, d
}

// maxIdleCheckAllocs: one today (the wait for OpenCode's answer), and a
// margin of one. Sorting the read's names into a fresh slice, as before,
// cost nine.
const maxIdleCheckAllocs = 2
