package statusapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// A daemon that watches several OpenCode servers refuses a reconnect of a
// directory that names none of them: arming the directory in every server
// would start its MCP servers (and run the commands its config names) in
// each. Naming one arms it there only; a reconnect of every armed
// directory needs no name.
func TestReconnectOfADirectoryNamesOneOfSeveralServers(t *testing.T) {
	a := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4101"}}
	b := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4102"}}
	s := &API{Sources: []Source{a, b}, Broker: NewBroker(), Metrics: metrics.NewSet(), Token: testToken}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Broker.Close()
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	ctx := context.Background()

	_, err := c.Reconnect(ctx, ReconnectRequest{Directory: "/p"})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "several") ||
		!strings.Contains(err.Error(), "http://127.0.0.1:4101") || !strings.Contains(err.Error(), "http://127.0.0.1:4102") {
		t.Fatalf("a directory without url, two servers watched: err = %v, want 400 naming both", err)
	}
	if len(a.calls)+len(b.calls) != 0 {
		t.Fatalf("the refused reconnect armed the directory: %+v %+v", a.calls, b.calls)
	}

	res, err := c.Reconnect(ctx, ReconnectRequest{Directory: "/p", URL: "http://127.0.0.1:4102/"})
	if err != nil || len(res.Results) != 1 || res.Results[0].URL != "http://127.0.0.1:4102" {
		t.Fatalf("with url: %+v, %v", res, err)
	}
	if len(a.calls) != 0 || len(b.calls) != 1 || b.calls[0].Directory != "/p" {
		t.Fatalf("with url: calls %+v %+v, want the named server's only", a.calls, b.calls)
	}

	if _, err := c.Reconnect(ctx, ReconnectRequest{}); err != nil {
		t.Fatalf("every armed directory of every server: %v", err)
	}
	if len(a.calls) != 1 || len(b.calls) != 2 || a.calls[0].Directory != "" {
		t.Fatalf("without a directory: calls %+v %+v, want one each", a.calls, b.calls)
	}
}
