package opencode_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// statusBody is a GET /mcp answer of n servers, one of them failed.
func statusBody(n int) []byte {
	var parts []string
	for i := range n - 1 {
		parts = append(parts, fmt.Sprintf(`"s%d":{"status":"connected"}`, i))
	}
	parts = append(parts, `"dead":{"status":"failed","error":"Connection closed"}`)
	return []byte("{" + strings.Join(parts, ",") + "}")
}

// A status read of ten servers, as every check of every armed directory
// makes (35 a second at idle with a thousand directories), costs the
// result's map and nothing per server once their names and texts were
// seen: no per-read copy of a name, a status or an error text, no
// reflection. (Decoded with encoding/json into maps, as before, it cost
// 79 allocations.)
func TestStatusReadAllocatesOnlyItsMap(t *testing.T) {
	body := statusBody(10)
	if _, err := opencode.ParseStatus(body); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if st, err := opencode.ParseStatus(body); err != nil || len(st) != 10 {
			t.Fatalf("ParseStatus = %v, %v", st, err)
		}
	})
	if allocs > 4+opencode.RaceParseAllocs {
		t.Errorf("%.0f allocations per status read of ten servers, want at most %d (the map)", allocs, 4+opencode.RaceParseAllocs)
	}
}

// referenceStatus is ParseStatus as encoding/json decodes it, to check
// the scanner against.
func referenceStatus(b []byte) (map[string]opencode.ServerStatus, bool) {
	var m map[string]*struct {
		Status *string         `json:"status"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil, false
	}
	out := map[string]opencode.ServerStatus{}
	for name, v := range m {
		if v == nil || v.Status == nil {
			return nil, false
		}
		st := opencode.ServerStatus{Status: *v.Status}
		if len(v.Error) > 0 && string(v.Error) != "null" {
			if json.Unmarshal(v.Error, &st.Error) != nil {
				st.Error = string(v.Error)
			}
		}
		out[name] = st
	}
	return out, true
}

// The scanner reads what encoding/json reads: the same servers, statuses
// and errors, and an error wherever encoding/json finds none to give.
func FuzzParseStatusAsEncodingJSON(f *testing.F) {
	f.Add(statusBody(10))
	f.Add([]byte(`{"a":{"status":"connected","status":"failed"},"a":{"status":"disabled"}}`))
	f.Add([]byte(`{"a b/ü":{"STATUS":"failed","error":{"x":[1,2]}}}`))
	f.Add([]byte(`{"a":{"status":"connected","error":null}}`))
	f.Add([]byte(`{"a":{"status":"x\u00e9\n","error":"e\"q"}}`))
	f.Add([]byte(`{"a":{"status":5}}`))
	f.Add([]byte(`{"a":null}`))
	f.Add([]byte(`{"a":[]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte(` {} `))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := opencode.ParseStatus(b)
		want, ok := referenceStatus(b)
		if !ok {
			// encoding/json refuses a few texts the scanner reads (a
			// field of the wrong type in an entry a repeated key
			// replaces); FuzzParseStatus checks that none reads as "no
			// servers".
			return
		}
		if err != nil {
			t.Fatalf("ParseStatus(%s) = %v; encoding/json reads %+v", b, err, want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseStatus(%s)\n = %+v\nencoding/json: %+v", b, got, want)
		}
	})
}
