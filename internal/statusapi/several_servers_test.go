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

// run hands its --directory to the daemon that follows the OpenCode 2
// service before its command starts the service, whose URL it cannot
// know yet: the request names the server by the service file it follows
// (as the daemon's registry entry spells it), and keeps the directory
// there only. A file the daemon follows in no server is 404, armed
// nowhere.
func TestReconnectNamesTheServerByTheServiceFileItFollows(t *testing.T) {
	a := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4101"}}
	b := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:49374"}, file: "/state/opencode/service.json"}
	s := &API{Sources: []Source{a, b}, Broker: NewBroker(), Metrics: metrics.NewSet(), Token: testToken}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Broker.Close()
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	ctx := context.Background()

	if _, err := c.Reconnect(ctx, ReconnectRequest{Directory: "/p", Keep: true, Service: "/state/opencode/service.json"}); err != nil {
		t.Fatalf("keep in the service's server: %v", err)
	}
	if len(a.armed)+len(a.calls) != 0 || len(b.armed) != 1 || b.armed[0] != "/p "+reconnect.ArmedByFlag {
		t.Fatalf("armed %q in the other server, %q in the service's; want /p kept in the service's only", a.armed, b.armed)
	}
	_, err := c.Reconnect(ctx, ReconnectRequest{Directory: "/q", Keep: true, Service: "/other/service.json"})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a service file the daemon does not follow: err = %v, want 404", err)
	}
	if len(a.armed)+len(b.armed) != 1 {
		t.Fatalf("a refused keep armed the directory: %q %q", a.armed, b.armed)
	}
}
