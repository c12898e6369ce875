package statusapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The client sends the daemon's token with a mutation only: GET /status
// goes to whatever answers at the address, and a read needs no token, so
// none travels with it.
func TestClientNeverSendsTheTokenOnGet(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // "METHOD path" → Authorization
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/status":
			_, _ = w.Write([]byte(`{"version":"test","servers":[]}`))
		default:
			_, _ = w.Write([]byte(`{"results":[]}`))
		}
	}))
	defer hs.Close()
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, ok := seen["GET /status"]; !ok || got != "" {
		t.Errorf("GET /status carried Authorization %q (seen: %v)", got, ok)
	}
	// The server above does see a token when one is sent.
	if got := seen["POST /reconnect"]; got != "Bearer "+testToken {
		t.Errorf("POST /reconnect carried Authorization %q, want the token", got)
	}
}
