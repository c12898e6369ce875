package reconnect

import (
	"testing"
	"time"
)

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
