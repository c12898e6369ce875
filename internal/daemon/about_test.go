package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// What a server lacks is a capability the daemon says it runs without, in
// status too: the preview build has no config route (kinds come from the
// config files); 2.1.2 lacks nothing; nothing is said (and nothing
// asked) before a detection.
func TestStatusSaysWhatTheServerRunsWithout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fake    *fake2.Server
		without []string
	}{
		{"preview", fake2.NewPreview(map[string]fakeopencode.Spec{"s": {}}), []string{"config"}},
		{"2.1.2", fake2.New(map[string]fakeopencode.Spec{"s": {}}), nil},
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
				if info := about(client); info != nil || len(tc.fake.Requests()) != 0 {
					t.Fatalf("before a detection: %+v, %d requests", info, len(tc.fake.Requests()))
				}
				if _, _, err := client.Detect(context.Background()); err != nil {
					t.Fatal(err)
				}
				info := about(client)
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
