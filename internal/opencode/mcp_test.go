package opencode_test

import (
	"encoding/json"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
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
func referenceStatus(b []byte) (map[string]opencode.MCPServerStatus, bool) {
	var m map[string]*struct {
		Status *string         `json:"status"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil, false
	}
	out := map[string]opencode.MCPServerStatus{}
	for name, v := range m {
		if v == nil || v.Status == nil {
			return nil, false
		}
		st := opencode.MCPServerStatus{Status: *v.Status}
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

// An error text a server showed once and never again (one naming a port,
// a request id, a time, a line of its stderr) is no one's once the read
// that showed it is gone: status reads must not keep it. Interned for
// good in a map bounded by count (16,384 strings), not by size, the texts
// of 20,000 reads of 4 KiB each stay on the heap (64 MiB; with the
// client's 4 MiB body limit the bound is 64 GiB), and the map is never
// emptied.
func TestStatusReadsKeepNoErrorTextTheyNoLongerShow(t *testing.T) {
	pad := strings.Repeat("x", 4<<10)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 20000 {
		body := fmt.Sprintf(`{"s":{"status":"failed","error":"connect ECONNREFUSED %d %s"}}`, i, pad)
		if _, err := opencode.ParseStatus([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 8<<20 {
		t.Fatalf("after 20,000 status reads whose results are gone, %d MiB of the heap are still held", grown>>20)
	}
}

// Once many distinct texts were seen (error texts that change from read
// to read fill the intern map in a day of a thousand directories), a
// directory armed later still reads its status for the cost of the map:
// its server names and statuses are shared too. With the map full of
// stale texts, nothing new is interned again, and every read of the new
// servers copies each name and status anew.
func TestStatusReadAllocatesOnlyItsMapAfterManyErrorTexts(t *testing.T) {
	for i := range 20000 {
		body := fmt.Sprintf(`{"s":{"status":"failed","error":"Request timed out after %d ms"}}`, i)
		if _, err := opencode.ParseStatus([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	var parts []string
	for i := range 10 {
		parts = append(parts, fmt.Sprintf(`"late-server-%d":{"status":"connected"}`, i))
	}
	body := []byte("{" + strings.Join(parts, ",") + "}")
	if _, err := opencode.ParseStatus(body); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if st, err := opencode.ParseStatus(body); err != nil || len(st) != 10 {
			t.Fatalf("ParseStatus = %v, %v", st, err)
		}
	})
	if allocs > 4+opencode.RaceParseAllocs {
		t.Errorf("%.0f allocations per status read of ten servers seen before, want at most %d (the map)", allocs, 4+opencode.RaceParseAllocs)
	}
}
