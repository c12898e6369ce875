package reconnect

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// slowConfigOC answers GET /config after a delay, during which the user
// disables the server (onConfig runs when the config request arrives).
type slowConfigOC struct {
	OpenCode
	delay    time.Duration
	onConfig func()
}

func (o *slowConfigOC) MCPConfig(ctx context.Context, dir string) (map[string]opencode.MCPEntry, error) {
	if o.onConfig != nil {
		o.onConfig()
	}
	select {
	case <-time.After(o.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return o.OpenCode.MCPConfig(ctx, dir)
}

// Rule 7 / rule 1. check decides its connects from the status read,
// then reads GET /config (learnKinds: whenever a failed or connected
// server's kind is unknown, i.e. at the first check of every directory and
// at every check after a config read failed) and only then connects. The
// config read can take up to the client's timeout (15 s; 2.x waits for the
// location's plugins first), so the connect goes out on a status read that
// old: a server the user disabled meanwhile is re-enabled by it (both
// generations' connect overrides disabled).
func TestConnectNotSentOnStatusOlderThanConfigRead(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {Status: "failed", Error: "Connection closed"}})
		rr := &rig{t: t, fake: fake}
		tr, stop := rr.serve()
		defer stop()
		client, _ := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Transport: tr, Password: fake.Secret()}})
		if _, _, err := client.Detect(context.Background()); err != nil {
			t.Fatal(err)
		}
		// A client uses the directory: its instance exists.
		if _, err := client.MCPStatus(context.Background(), dirA); err != nil {
			t.Fatal(err)
		}
		oc := &slowConfigOC{OpenCode: client, delay: 10 * time.Second}
		oc.onConfig = func() {
			// The user disables the server while the daemon reads the config.
			go fake.SetStatus(dirA, "s", "disabled", "")
		}
		eng, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = eng.Run(ctx) }()
		defer func() { cancel(); <-done }()
		if err := eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := fake.Count(routeConnect, dirA, "s"); n != 0 {
			t.Errorf("%d connect(s) for a server disabled 10 s before the connect was sent (decided on the read before the config read)", n)
		}
	})
}
