package opencode_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// Rule 8 says that from the moment OpenCode refuses connections
// every directory is forgotten; the engine learns it from ErrRefused on a
// status read or connect (engine.unreadable, finishConnect). The 2.x
// client's send never marks a refused dial, so on OpenCode 2.x a service
// that went away is only "unavailable": the engine keeps every directory
// and its next idle read re-boots each location in the restarted service,
// spawning MCP fleets nobody uses.
func TestV2CallsReportRefused(t *testing.T) {
	closed := closedAddr(t)
	ctx := context.Background()
	c, err := opencode.NewV2("http://"+closed, opencode.Options{Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	_, errStatus := c.MCPStatus(ctx, "/d")
	_, errConfig := c.MCPConfig(ctx, "/d")
	_, errInfo := c.Info(ctx)
	for call, err := range map[string]error{
		"status": errStatus, "config": errConfig, "info": errInfo,
		"connect": c.Connect(ctx, "/d", "s"),
	} {
		if !errors.Is(err, opencode.ErrUnavailable) {
			t.Errorf("2.x %s: err = %v, want ErrUnavailable", call, err)
		}
		if !errors.Is(err, opencode.ErrRefused) {
			t.Errorf("2.x %s: errors.Is(ErrRefused) = false for a refused dial (%v)", call, err)
		}
	}
}

// The same through opencode.Server, which is what the daemon's engine
// calls: a 2.x server detected, then gone (its port closed).
func TestServerV2StatusAfterServiceGoneIsRefused(t *testing.T) {
	fake := fake2.New(map[string]fake2.Spec{"a": {}})
	srv := httptest.NewServer(fake)
	s, err := opencode.NewServer(opencode.ServerOptions{URL: srv.URL, Client: opencode.Options{Password: fake2.DefaultPassword}})
	if err != nil {
		t.Fatal(err)
	}
	if gen, _, err := s.Detect(context.Background()); err != nil || gen != opencode.V2 {
		t.Fatalf("detect: %v %v", gen, err)
	}
	srv.Close()
	_, err = s.MCPStatus(context.Background(), "/d")
	if !errors.Is(err, opencode.ErrRefused) {
		t.Errorf("2.x status read after the service went away: errors.Is(ErrRefused) = false (%v); the engine keeps every directory armed", err)
	}
}
