package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// What a server lacks is a capability the daemon says it runs without, in
// status too: a server whose config route answered 404 (no such route)
// runs with the server kinds unknown; 2.1.2 lacks nothing; a system
// without the process view (macOS) lacks processes; nothing is said (and
// nothing asked) before a detection.
func TestStatusSaysWhatTheServerRunsWithout(t *testing.T) {
	noConfig := fake2.New(map[string]fakeopencode.Spec{"s": {}})
	noConfig.SetDoc([]byte(strings.Replace(fake2.DefaultDoc, `"/api/config":`, `"/api/config-gone":`, 1)))
	for _, tc := range []struct {
		name    string
		fake    *fake2.Server
		noView  error
		without []string
	}{
		{"no config route", noConfig, nil, []string{"config"}},
		{"2.1.2", fake2.New(map[string]fakeopencode.Spec{"s": {}}), nil, nil},
		{"no process view", fake2.New(map[string]fakeopencode.Spec{"s": {}}), errors.ErrUnsupported, []string{"processes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hosts := fakeopencode.NewHosts()
				defer hosts.Close()
				hosts.Serve(host2, tc.fake)
				client, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + host2,
					Client: opencode.Options{Password: fake2.DefaultPassword, Transport: hosts.Transport()}})
				if err != nil {
					t.Fatal(err)
				}
				if info := about(client, tc.noView); info != nil || len(tc.fake.Requests()) != 0 {
					t.Fatalf("before a detection: %+v, %d requests", info, len(tc.fake.Requests()))
				}
				if _, _, err := client.Detect(context.Background()); err != nil {
					t.Fatal(err)
				}
				_, _ = client.MCPConfig(context.Background(), "/p")
				info := about(client, tc.noView)
				if info == nil || info.Generation != "2.x" {
					t.Fatalf("about = %+v", info)
				}
				var names []string
				for _, w := range info.RunsWithout {
					name, _, _ := strings.Cut(w, " ")
					names = append(names, name)
				}
				if !slices.Equal(names, tc.without) {
					t.Fatalf("runs without %q, want %q", info.RunsWithout, tc.without)
				}
			})
		})
	}
}
