package daemon

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// The shared connect budget is one FIFO line for every
// server. Server one has six directories whose failed local MCP server
// hangs in connect (70 s, under the 75 s connect timeout); server two's
// MCP server crashes once. Its first reconnect waits behind every hanging
// connect of server one (two slots, six 70 s connects ahead of it: about
// 140 s), so one server's hang delays another server's recovery by
// minutes. Rule 5 bounds connects "across all directories" but says
// nothing about servers, and one server's trouble must not affect
// another. This test asks that server two recovers within a
// minute of its crash.
func TestHangingServerDoesNotStarveAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"a": {Status: "failed", ConnectDelay: 70 * time.Second}})
		v1.Password = "one-pw"
		v1.SetHeartbeat(10 * time.Second)
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "connected", AfterConnect: "connected"}})
		v2.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve(host1, v1)
		hosts.Serve(host2, v2)
		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		ec.MaxConcurrent = 2
		cfg := Config{
			Servers: []Target{
				{URL: "http://" + host1, Password: "one-pw", Directories: []string{"/a1", "/a2", "/a3", "/a4", "/a5", "/a6"}, Transport: hosts.Transport()},
				{URL: "http://" + host2, Password: fake2.DefaultPassword, Directories: []string{"/b"}, Transport: hosts.Transport()},
			},
			Engine: ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		v2.Crash("/b", "b")
		time.Sleep(60 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteConnect, "/b", "b"); n == 0 {
			t.Fatalf("server two's crashed MCP server got no connect in the 60 s after its crash: server one's hanging connects hold the shared budget (%d connects of server one so far)",
				v1.Count("/mcp/{name}/connect", "", ""))
		}
	})
}
