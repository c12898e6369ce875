package fake2_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// The Preview profile's GET /openapi.json is the real preview build's,
// byte for byte: the answer recorded from it (testdata), not a copy that
// could drift. (Release2021 has no such test: no OpenCode 2.0.21 answer
// was ever recorded; its DefaultDoc is hand-built, see testdata/README.md.)
func TestPreviewDescriptionIsTheRecordedOne(t *testing.T) {
	want, err := os.ReadFile("testdata/opencode-v2-preview-openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fake2.NewPreview(nil))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/openapi.json", nil)
	req.SetBasicAuth("opencode", fake2.DefaultPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
		t.Errorf("GET /openapi.json: %d, %d bytes; the recorded answer is 200, %d bytes", resp.StatusCode, len(got), len(want))
	}
}
