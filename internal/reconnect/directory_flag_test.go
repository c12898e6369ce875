package reconnect

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// --directory arms directories "from the start" (SPEC, flags), but
// a `watch --directory D` started before OpenCode (a service manager
// starting both, a login script) loses D for good: its first check, one
// initial-delay after start, is refused, opencodeGone forgets every
// directory, and nothing arms a --directory again. When OpenCode comes up,
// D's failed servers are never retried unless a client happens to use D.
// (The same happens to every --directory at each OpenCode restart.) The
// refused-means-forget rule exists so the daemon does not re-create
// instances nobody uses; a directory the user named is one they use.
func TestDirectoryFlagSurvivesOpenCodeNotYetUp(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"broken": {Status: "failed", Error: "Connection closed"}})
		rr := &rig{t: t, fake: fake}
		tr, stop := rr.serve()
		defer stop()
		client, _ := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Transport: tr, Password: fake.Secret()}})
		oc := &refusingOC{OpenCode: client}
		oc.refuse.Store(true) // OpenCode is not running yet
		eng, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		oc.gone = eng.OpenCodeGone
		if err := eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = eng.Run(ctx) }()
		defer func() { cancel(); <-done }()
		time.Sleep(3 * time.Second)
		oc.refuse.Store(false) // OpenCode is up
		if _, _, err := client.Detect(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := fake.Count(routeConnect, dirA, "broken"); n == 0 {
			t.Errorf("no connect for %s, armed by --directory, after OpenCode came up (armed directories now: %d)", dirA, len(eng.Snapshot().Directories))
		}
	})
}
