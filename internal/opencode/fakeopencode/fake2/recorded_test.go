package fake2_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// Each profile's GET /openapi.json is the real server's answer, byte for
// byte: the file recorded from it (testdata), not a copy that could drift,
// and the file is the recording (its SHA-256, taken when it was recorded
// from the npm release and the preview build).
func TestDescriptionsAreTheRecordedOnes(t *testing.T) {
	for _, c := range []struct {
		fake *fake2.Server
		file string
		sum  string
	}{
		{fake2.New(nil), "testdata/opencode-2.1.2-openapi.json", "b99ddb33ba96f6a5bfba762ba777987c1339e09c881bbc76d4deefeb74ee5449"},
		{fake2.NewPreview(nil), "testdata/opencode-v2-preview-openapi.json", "64ea322c2d796cd17db92f3cb29f75fffa6f99ec2d427a7b0b7b99ddda4d6bca"},
	} {
		t.Run(c.fake.Profile().Name, func(t *testing.T) {
			want, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(want); hex.EncodeToString(sum[:]) != c.sum {
				t.Fatalf("%s has SHA-256 %x, the recording's is %s", c.file, sum, c.sum)
			}
			srv := httptest.NewServer(c.fake)
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
		})
	}
}
