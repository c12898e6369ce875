package statusapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
)

// request sends one request to hs with the given Host and headers and
// returns the status code and body.
func request(t *testing.T, hs *httptest.Server, method, path, host string, hdr map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(`{"directory":"/attacker/chosen"}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, hs.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// /events streams: its first bytes are enough.
	b := make([]byte, 4096)
	n, _ := io.ReadAtLeast(resp.Body, b, 1)
	return resp.StatusCode, string(b[:n])
}

var routes = []struct{ method, path string }{
	{"GET", "/status"}, {"GET", "/metrics"}, {"GET", "/events"}, {"POST", "/reconnect"}, {"GET", "/no-such-route"},
	{"GET", "/healthz"}, {"GET", "/readyz"},
}

// DNS rebinding: a page at http://evil.example:PORT whose name now
// resolves to 127.0.0.1 sends Host and Origin both naming evil.example.
// Every route refuses it before any handler runs, even with the token,
// and nothing is armed.
func TestForeignHostRefusedOnEveryRoute(t *testing.T) {
	src, _, hs := newAPI(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hs.URL, "http://"))
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "127.0.0.1.evil.example:" + port,
		"0.0.0.0:" + port, "192.0.2.1:" + port, "[fe80::1]:" + port, "localhostx:" + port} {
		for _, rt := range routes {
			code, body := request(t, hs, rt.method, rt.path, host, map[string]string{
				"Origin": "http://" + host, "Authorization": "Bearer " + testToken, "Sec-Fetch-Site": "same-origin",
			})
			if code != http.StatusForbidden {
				t.Errorf("%s %s with Host %q = %d, want 403", rt.method, rt.path, host, code)
			}
			if strings.Contains(body, "Connection closed") || strings.Contains(body, "mcp_reconnect") {
				t.Errorf("%s %s with Host %q leaked a body: %q", rt.method, rt.path, host, body)
			}
		}
	}
	if len(src.calls) != 0 {
		t.Fatalf("a refused request armed something: %+v", src.calls)
	}
	// An HTTP/1.0 request with no Host at all is refused too.
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /status HTTP/1.0\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.Contains(line, "403") {
		t.Errorf("no Host: %q, want 403", line)
	}
}

func TestLoopbackHostsAccepted(t *testing.T) {
	_, _, hs := newAPI(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hs.URL, "http://"))
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port, "127.0.0.2:" + port, "localhost"} {
		for _, rt := range routes[:3] {
			if code, _ := request(t, hs, rt.method, rt.path, host, nil); code != http.StatusOK {
				t.Errorf("%s %s with Host %q = %d, want 200", rt.method, rt.path, host, code)
			}
		}
	}
}

// With --status-public any Host is served (the user put the API on the
// network on purpose), but a mutation still needs the token.
func TestPublicStillNeedsToken(t *testing.T) {
	src := &fakeSource{}
	s := &API{Sources: []Source{src}, Broker: NewBroker(), Metrics: metrics.NewSet(), Token: testToken, Public: true}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Broker.Close()
	if code, _ := request(t, hs, "GET", "/status", "mybox.lan:4097", nil); code != http.StatusOK {
		t.Errorf("public GET /status = %d", code)
	}
	if code, _ := request(t, hs, "POST", "/reconnect", "mybox.lan:4097", nil); code != http.StatusUnauthorized {
		t.Errorf("public POST /reconnect without a token = %d, want 401", code)
	}
	if code, _ := request(t, hs, "POST", "/reconnect", "mybox.lan:4097", map[string]string{"Authorization": "Bearer " + testToken}); code != http.StatusOK {
		t.Errorf("public POST /reconnect with the token = %d", code)
	}
	if len(src.calls) != 1 {
		t.Fatalf("calls = %+v", src.calls)
	}
}

// A mutation without the token, with a wrong one, or with the token of
// another daemon is refused and arms nothing; the right one works.
func TestReconnectNeedsToken(t *testing.T) {
	src, _, hs := newAPI(t)
	other := "another-daemons-token-fedcba9876543210"
	for name, auth := range map[string]string{
		"none":           "",
		"wrong":          "Bearer nope",
		"other daemon":   "Bearer " + other,
		"empty":          "Bearer ",
		"prefix":         "Bearer " + testToken[:len(testToken)-1],
		"longer":         "Bearer " + testToken + "x",
		"basic":          "Basic " + testToken,
		"no scheme":      testToken,
		"lower scheme":   "bearer x",
		"token in query": "",
	} {
		hdr := map[string]string{}
		if auth != "" {
			hdr["Authorization"] = auth
		}
		path := "/reconnect"
		if name == "token in query" {
			path += "?token=" + testToken
		}
		code, body := request(t, hs, "POST", path, "", hdr)
		if code != http.StatusUnauthorized {
			t.Errorf("%s: POST /reconnect = %d, want 401", name, code)
		}
		if strings.Contains(body, testToken) || strings.Contains(body, other) {
			t.Errorf("%s: the refusal echoes a token: %q", name, body)
		}
		if !strings.Contains(body, "mcp-reconnect reconnect") {
			t.Errorf("%s: the refusal does not name the fix: %q", name, body)
		}
	}
	if len(src.calls) != 0 {
		t.Fatalf("a refused mutation armed something: %+v", src.calls)
	}
	if code, _ := request(t, hs, "POST", "/reconnect", "", map[string]string{"Authorization": "Bearer " + testToken}); code != http.StatusOK {
		t.Fatalf("with the right token: %d", code)
	}
	if len(src.calls) != 1 || src.calls[0].Directory != "/attacker/chosen" {
		t.Fatalf("calls = %+v", src.calls)
	}
	// Another daemon's client (holding its own token) is refused here.
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: other}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("another daemon's token: err = %v", err)
	}
}

// A daemon without a token (misconfigured) refuses every mutation, even
// one that presents an empty token: an empty token must never compare
// equal to the daemon's empty one. Over the wire net/http trims the
// header to "Bearer", which fails the scheme check first, so the empty
// token is handed to the handler directly, as any server that does not
// trim header values would hand it.
func TestNoTokenFailsClosed(t *testing.T) {
	src := &fakeSource{}
	s := &API{Sources: []Source{src}, Broker: NewBroker(), Metrics: metrics.NewSet()}
	defer s.Broker.Close()
	h := s.Handler()
	for _, auth := range []string{"", "Bearer ", "Bearer", "Bearer x"} {
		req := httptest.NewRequest("POST", "http://127.0.0.1:4097/reconnect", strings.NewReader(`{"directory":"/attacker/chosen"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header["Authorization"] = []string{auth}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("auth %q: %d, want 401", auth, rec.Code)
		}
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	for _, auth := range []string{"", "Bearer ", "Bearer x"} {
		if code, _ := request(t, hs, "POST", "/reconnect", "", map[string]string{"Authorization": auth}); code != http.StatusUnauthorized {
			t.Errorf("over the wire, auth %q: %d, want 401", auth, code)
		}
	}
	if len(src.calls) != 0 {
		t.Fatalf("calls = %+v", src.calls)
	}
}

// The token never appears on a read-only route.
func TestReadOnlyRoutesShowNoToken(t *testing.T) {
	_, _, hs := newAPI(t)
	for _, rt := range routes[:3] {
		code, body := request(t, hs, rt.method, rt.path, "", nil)
		if code != http.StatusOK || strings.Contains(body, testToken) {
			t.Errorf("%s %s = %d, shows the token: %v", rt.method, rt.path, code, strings.Contains(body, testToken))
		}
	}
}
