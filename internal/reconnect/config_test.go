package reconnect

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"testing"
	"time"
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

// unlistedConfig is a fake whose config read leaves out one server that
// status lists (as OpenCode does for a server added at run time with
// POST /mcp, which lives in the instance's state, not in its config).
type unlistedConfig struct {
	fakeOC
	hide string
}

func (u *unlistedConfig) ServeHTTP(w http.ResponseWriter, q *http.Request) {
	if q.URL.Path != "/config" && q.URL.Path != "/api/config" {
		u.fakeOC.ServeHTTP(w, q)
		return
	}
	rec := httptest.NewRecorder()
	u.fakeOC.ServeHTTP(rec, q)
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err == nil {
		hide := func(o any) {
			if m, ok := o.(map[string]any); ok {
				if mcp, ok := m["mcp"].(map[string]any); ok {
					delete(mcp, u.hide) // 1.x
					if servers, ok := mcp["servers"].(map[string]any); ok {
						delete(servers, u.hide) // 2.x
					}
				}
			}
		}
		if layers, ok := body.([]any); ok { // 2.x: layers, each with info.mcp.servers
			for _, l := range layers {
				if m, ok := l.(map[string]any); ok {
					hide(m["info"])
				}
			}
		} else {
			hide(body)
		}
		b, _ := json.Marshal(body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(b)
		return
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// A server that status lists and GET /config does not (added at run
// time) must not clear kindsKnown at every check, or every idle check
// reads the config again, forever: 21 config reads in ten idle minutes
// of one directory, where the engine should read it once (TestRequestsAreExactlyTheSchedule
// allows one per directory). With many directories that is a config
// resolution per directory per idle interval for nothing.
func TestServerMissingFromConfigDoesNotReadConfigAtEveryCheck(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		inner := g.new(map[string]Spec{"ok": {}, "added": {}})
		fake := &unlistedConfig{fakeOC: inner, hide: "added"}
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		r.at(10 * time.Minute)
		reads := inner.Count(routeStatus, dirA, "")
		if n := inner.Count(routeConfig, dirA, ""); n > 2 {
			t.Fatalf("config reads in 10 idle minutes = %d (status reads %d), want 1: a server missing from GET /config makes every check read the config again", n, reads)
		}
	})
}

// An OpenCode restart drops a --directory directory's config knowledge:
// a remote server whose URL changed in the config OpenCode restarted
// with is probed and watched at its new URL, not its old one (GET /config
// is read only while kinds are unknown).
func TestDirectoryFlagReadsConfigAgainAfterOpenCodeRestart(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"svc": {Type: "remote", URL: "http://old.example/mcp"}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		r.at(5 * time.Second)
		fake.SetDirConfig(dirA, map[string]Spec{"svc": {Type: "remote", URL: "http://new.example/mcp"}})
		fake.Dispose(dirA) // the old process's instance is gone with it (no stream here: no event)
		r.eng.OpenCodeReplaced()
		r.at(60 * time.Second)
		r.eng.mu.Lock()
		d := r.eng.dirs[dirA]
		var url string
		if d != nil {
			url = d.config.remote("svc")
		}
		r.eng.mu.Unlock()
		if d == nil {
			t.Fatal("the --directory directory is not armed after the restart")
		}
		if url != "http://new.example/mcp" {
			t.Fatalf("after OpenCode restarted with a new config, svc's endpoint is %q (config reads: %d), want the new URL", url, fake.Count(routeConfig, dirA, ""))
		}
	})
}
