package opencode_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// A status body that cannot be understood is no news (rule 9), and it
// costs no more to find so than encoding/json takes to read it: half
// a megabyte of servers without a status (each null) is refused in about
// the time of one pass over it. ParseStatus keeps the servers that lack
// one in a slice it searches for every entry (lacks, and the
// slices.Index for each good entry), so such a body costs time
// quadratic in its entries: ten seconds a megabyte here, minutes at the
// client's 4 MiB body limit, while the check that reads it is counted
// as making no progress (Alive's StuckAfter is two minutes).
func TestUnreadableStatusCostsOnePass(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for n := 0; b.Len() < 1<<19; n++ {
		if n > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":null`, n)
	}
	b.WriteString("}")
	body := []byte(b.String())

	start := time.Now()
	var ref map[string]*struct {
		Status *string `json:"status"`
	}
	_ = json.Unmarshal(body, &ref)
	refTook := time.Since(start)

	start = time.Now()
	st, err := opencode.ParseStatus(body)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("ParseStatus = %d servers, nil error; want an error", len(st))
	}
	if limit := max(20*refTook, time.Second); took > limit {
		t.Fatalf("ParseStatus took %v to refuse a 512 KiB body of servers without a status (encoding/json reads it in %v)", took.Round(time.Millisecond), refTook.Round(time.Millisecond))
	}
}
