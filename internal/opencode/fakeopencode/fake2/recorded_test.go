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
// could drift. (No OpenCode 2.0.21 answer was ever recorded: the
// Release2021 profile's, below, is the hand-built one of testdata/README.md.)
func TestPreviewDescriptionIsTheRecordedOne(t *testing.T) {
	servesFile(t, fake2.NewPreview(nil), "testdata/opencode-v2-preview-openapi.json")
}

// The Release2021 profile serves the 2.0.21 description the doctor's and
// apidesc's 2.x tests read, byte for byte: one file, not two copies.
func TestRelease2021DescriptionIsTheTestdataOne(t *testing.T) {
	servesFile(t, fake2.New(nil), "testdata/opencode-2.0.21-openapi.json")
}

// servesFile checks that fake answers GET /openapi.json with file.
func servesFile(t *testing.T, fake *fake2.Server, file string) {
	t.Helper()
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fake)
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
