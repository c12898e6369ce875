package opencode_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

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
