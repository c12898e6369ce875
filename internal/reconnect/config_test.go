package reconnect

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// armChecked arms n directories of o's servers on e, each checked twice
// (the first check learns the config), as the engine's steps would.
func armChecked(t *testing.T, e *Engine, n int) []*dir {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dirs := make([]*dir, n)
	for i := range dirs {
		d := newDir(fmt.Sprintf("/p/%04d", i), ArmedByFlag, time.Now(), cancel)
		e.mu.Lock()
		e.dirs[d.path] = d
		e.mu.Unlock()
		e.check(ctx, d)
		e.check(ctx, d)
		dirs[i] = d
	}
	return dirs
}

// Directories configured alike (the user's global config: the common
// case) share one copy of it, whatever GET /config decoded anew for each.
func TestDirectoriesConfiguredAlikeShareOneConfig(t *testing.T) {
	e, err := New(noJitter(), newSteadyOC(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dirs := armChecked(t, e, 3)
	first := reflect.ValueOf(dirs[0].config).UnsafePointer()
	for _, d := range dirs {
		if len(d.config) != 10 || d.config.remote("off") != "http://127.0.0.1:1/mcp" || !d.config.local("s0") {
			t.Fatalf("config of %s = %v", d.path, d.config)
		}
		if reflect.ValueOf(d.config).UnsafePointer() != first {
			t.Fatalf("%s holds its own copy of a config its neighbours share", d.path)
		}
	}
}

// A config read again that says what it said before changes nothing the
// process view needs; a changed command does.
func TestConfigReadAgainUnchangedLeavesTheLocalServersAlone(t *testing.T) {
	oc := newSteadyOC()
	e, err := New(noJitter(), oc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := armChecked(t, e, 1)[0]
	gen, _, changed := e.LocalServers(0)
	if !changed {
		t.Fatal("no local servers after the config was read")
	}
	relearn := func() {
		e.mu.Lock()
		d.kindsKnown = false
		e.mu.Unlock()
		e.check(context.Background(), d)
	}
	relearn()
	if _, _, changed := e.LocalServers(gen); changed {
		t.Fatal("the local servers changed with a config read that said the same")
	}
	oc.config = map[string]opencode.MCPEntry{"s0": {Type: "local", Command: []string{"node", "other.js"}}}
	relearn()
	_, locals, changed := e.LocalServers(gen)
	if !changed || len(locals) != 1 || locals[0].Command[1] != "other.js" {
		t.Fatalf("after the command changed: changed %v, %+v", changed, locals)
	}
}

// What an armed directory of ten servers holds, once checked: its state,
// its servers' state, its share of the config. A thousand of them are the
// daemon's memory at scale (BENCHMARKS.md, "Memory at scale").
func TestArmedDirectoryCostsLittleMemory(t *testing.T) {
	e, err := New(noJitter(), newSteadyOC(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	armChecked(t, e, 1) // the engine's own first allocations
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	dirs := armChecked(t, e, n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	runtime.KeepAlive(dirs)
	t.Logf("%.0f bytes per armed directory of ten servers", per)
	if per > maxDirBytes {
		t.Errorf("an armed directory of ten servers holds %.0f bytes, want at most %d", per, maxDirBytes)
	}
}

// maxDirBytes: 2,550 bytes today, and a margin. A directory held 8,246
// with three maps of its own config, 5,299 with a shared config, 4,096
// with the state only some servers need (probes, a pending run, a dead
// child) allocated when they do, 2,584 with a backoff episode only for a
// server that has one.
const maxDirBytes = 3000
