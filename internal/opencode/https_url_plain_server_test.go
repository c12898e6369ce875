package opencode_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// A user who gives --url https://… for an OpenCode that serves plain HTTP
// (OpenCode serves no TLS itself) is told, by every read, what net/http's
// Client says of it: "server gave HTTP response to HTTPS client", which
// names the fix, not "tls: first record does not look like a TLS
// handshake", which the transport itself says: every request, detection's
// too, is sent by the transport; one misconfiguration gets one message.
func TestHTTPSURLForPlainHTTPServerSaysSchemeMismatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "https://", 1)
	c, err := opencode.New(url, opencode.Options{Password: "pw", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := opencode.NewV2(url, opencode.Options{Password: "pw", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const want = "server gave HTTP response to HTTPS client"
	calls := map[string]func() error{
		"1.x GET /mcp":     func() error { _, err := c.MCPStatus(ctx, "/d"); return err },
		"1.x GET /config":  func() error { _, err := c.MCPConfig(ctx, "/d"); return err },
		"1.x POST connect": func() error { return c.Connect(ctx, "/d", "s") },
		"2.x GET /api/mcp": func() error { _, err := c2.MCPStatus(ctx, "/d"); return err },
		"detection": func() error {
			_, _, _, err := opencode.Detect(ctx, url, opencode.Options{Password: "pw"})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, want)
		}
	}
}
