package examples

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// The README's status sample is what `status` prints: testdata's
// readme-status.json is a real `status --json` of a daemon watching
// OpenCode 1.18.34 (paths changed), and the table statusapi.WriteTable
// renders from it, at its own time, is the README's block, line for line.
// A change of the table shows here, not as a README that lies.
func TestREADMEStatusSampleIsWhatStatusPrints(t *testing.T) {
	var st statusapi.Status
	if err := json.Unmarshal([]byte(read(t, "test/examples/testdata/readme-status.json")), &st); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := statusapi.WriteTable(&b, st, st.Time); err != nil {
		t.Fatal(err)
	}
	var block []string
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			l = "    " + l
		}
		block = append(block, l)
	}
	want := strings.Join(block, "\n") + "\n"
	if readme := read(t, "README.md"); !strings.Contains(readme, "\n"+want+"\n") {
		t.Fatalf("README.md does not hold what status prints:\n%s", want)
	}
}
