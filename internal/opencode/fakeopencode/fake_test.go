package fakeopencode

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// The fake refuses a wrong password as the real 1.18.34 does, recorded
// with `curl -si -u opencode:wrong http://127.0.0.1:PORT/mcp` against
// `OPENCODE_SERVER_PASSWORD=sekret opencode serve` (and /api/health,
// which answers a tagged error): the status, the challenge and the body
// are the same; Date is left out.
func TestRefusalIsTheRealOne(t *testing.T) {
	check(t, "testdata/refusal-1.18.34.http", "/mcp", "/config", "/event", "/api/info", "/global/health", "/api/status")
	check(t, "testdata/refusal-api-health-1.18.34.http", "/api/health")
}

func check(t *testing.T, recorded string, paths ...string) {
	t.Helper()
	b, err := os.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	want, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantBody, _ := io.ReadAll(want.Body)

	fake := New(nil)
	fake.Password = "sekret"
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for _, path := range paths {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.SetBasicAuth("opencode", "wrong")
		got, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(got.Body)
		got.Body.Close()
		if got.StatusCode != want.StatusCode || !bytes.Equal(body, wantBody) {
			t.Errorf("%s: %d %q, the real one %d %q", path, got.StatusCode, body, want.StatusCode, wantBody)
		}
		for _, h := range []string{"Www-Authenticate", "Vary", "Content-Length", "Content-Type"} {
			if got.Header.Get(h) != want.Header.Get(h) {
				t.Errorf("%s: %s %q, the real one %q", path, h, got.Header.Get(h), want.Header.Get(h))
			}
		}
	}
}
