package reconnect

import "testing"

// BenchmarkIdleCheck is the engine's own part of an idle check of ten
// servers (a read that changes nothing), without HTTP.
func BenchmarkIdleCheck(b *testing.B) {
	e, ctx, d := idleChecked(b)
	b.ReportAllocs()
	for b.Loop() {
		e.check(ctx, d)
	}
}
