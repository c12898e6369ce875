package metrics

import (
	"bytes"
	"reflect"
	"runtime"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape writes s as /metrics does and reads it back with Prometheus' own
// parser, which fails on anything a Prometheus server would refuse.
func scrape(t *testing.T, s *Set, ready []Readiness) map[string]*dto.MetricFamily {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteTo(&buf, ready); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("Prometheus cannot read /metrics: %v\n%s", err, buf.String())
	}
	return families
}

// values is every sample of the mcp_reconnect_* families, keyed by name
// and labels.
func values(families map[string]*dto.MetricFamily) map[string]float64 {
	got := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, "mcp_reconnect_") {
			continue
		}
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return got
}

// Each server's metrics carry its url label, in one set; the same URL is
// the same metrics.
func TestEveryMetricCarriesTheURL(t *testing.T) {
	s := NewSet()
	a, b := s.For("http://127.0.0.1:4096"), s.For("http://127.0.0.1:49374")
	a.Attempts.Inc()
	s.For("http://127.0.0.1:4096").Attempts.Inc()
	b.Attempts.Inc()
	b.ArmedDirectories.Set(5)
	b.InFlightConnects.Inc()
	b.InFlightConnects.Inc()
	b.InFlightConnects.Dec()
	families := scrape(t, s, nil)
	for name, f := range families {
		if !strings.HasPrefix(name, "mcp_reconnect_") {
			continue
		}
		if len(f.GetMetric()) != 2 {
			t.Errorf("%s has %d series, want one per server", name, len(f.GetMetric()))
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "url" {
				t.Errorf("%s has labels %v, want url only", name, m.GetLabel())
			}
		}
	}
	got := values(families)
	for k, want := range map[string]float64{
		"mcp_reconnect_connect_attempts_total url=http://127.0.0.1:4096":  2,
		"mcp_reconnect_connect_attempts_total url=http://127.0.0.1:49374": 1,
		"mcp_reconnect_armed_directories url=http://127.0.0.1:49374":      5,
		"mcp_reconnect_armed_directories url=http://127.0.0.1:4096":       0,
		"mcp_reconnect_connects_in_flight url=http://127.0.0.1:49374":     1,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	if families["mcp_reconnect_connect_attempts_total"].GetType() != dto.MetricType_COUNTER || families["mcp_reconnect_armed_directories"].GetType() != dto.MetricType_GAUGE {
		t.Error("counters and gauges are not typed as such")
	}
}

// The readiness gauges are what the caller read at this scrape: one
// series per server, one reason each, and two entries of one URL make one
// server.
func TestReadinessGauges(t *testing.T) {
	now := []Readiness{
		{URL: "http://127.0.0.1:4096", Ready: true, Reason: ReasonReady},
		{URL: "http://127.0.0.1:4196", Ready: false, Reason: ReasonStreamDisconnected},
		{URL: "http://127.0.0.1:4196", Ready: true, Reason: ReasonReady},
	}
	s := NewSet()
	want := map[string]float64{
		"mcp_reconnect_ready url=http://127.0.0.1:4096":                                   1,
		"mcp_reconnect_ready url=http://127.0.0.1:4196":                                   0,
		"mcp_reconnect_ready_reason reason=ready url=http://127.0.0.1:4096":               1,
		"mcp_reconnect_ready_reason reason=stream_disconnected url=http://127.0.0.1:4196": 1,
	}
	if got := values(scrape(t, s, now)); !reflect.DeepEqual(got, want) {
		t.Errorf("scraped %v, want %v", got, want)
	}
	now = []Readiness{{URL: "http://127.0.0.1:4096", Reason: ReasonNotDetected}}
	want = map[string]float64{
		"mcp_reconnect_ready url=http://127.0.0.1:4096":                            0,
		"mcp_reconnect_ready_reason reason=not_detected url=http://127.0.0.1:4096": 1,
	}
	if got := values(scrape(t, s, now)); !reflect.DeepEqual(got, want) {
		t.Errorf("after a change: scraped %v, want %v", got, want)
	}
}

// A URL is the user's text, and a label value: quotes, backslashes and
// line breaks in it stay inside the label and cannot add a series.
func TestHostileURLStaysInItsLabel(t *testing.T) {
	hostile := "http://h/\"} 1\nmcp_reconnect_give_ups_total{url=\"x\"} 99\n\\"
	s := NewSet()
	s.For(hostile).GiveUps.Inc()
	got := values(scrape(t, s, []Readiness{{URL: hostile, Reason: ReasonStarting}}))
	want := map[string]float64{}
	for _, f := range families {
		want[f.name+" url="+hostile] = 0
	}
	want["mcp_reconnect_give_ups_total url="+hostile] = 1
	want["mcp_reconnect_ready url="+hostile] = 0
	want["mcp_reconnect_ready_reason reason=starting url="+hostile] = 1
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scraped %v, want %v", got, want)
	}
}

// A URL that is not UTF-8 is written as UTF-8: Prometheus would refuse
// the whole scrape for one such label.
func TestURLNotUTF8IsWrittenAsUTF8(t *testing.T) {
	s := NewSet()
	s.For("http://127.0.0.1:4096/\xff").Attempts.Inc()
	got := values(scrape(t, s, nil))
	if got["mcp_reconnect_connect_attempts_total url=http://127.0.0.1:4096/\uFFFD"] != 1 {
		t.Errorf("scraped %v, want the URL with U+FFFD for the byte", got)
	}
}

// The daemon's own cost is on /metrics under the names the Prometheus
// client's collectors give it (the benchmark, BENCHMARKS.md and
// docs/guide.md read these).
func TestRuntimeAndProcessMetrics(t *testing.T) {
	families := scrape(t, NewSet(), nil)
	names := []string{"go_goroutines", "go_threads", "go_info", "go_gc_duration_seconds", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes", "go_sched_gomaxprocs_threads",
		"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes",
		"go_memstats_sys_bytes", "go_memstats_next_gc_bytes", "go_memstats_alloc_bytes", "go_memstats_alloc_bytes_total"}
	if runtime.GOOS == "linux" {
		names = append(names, "process_resident_memory_bytes", "process_cpu_seconds_total", "process_start_time_seconds", "process_open_fds", "process_max_fds")
	}
	for _, name := range names {
		f := families[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Errorf("%s: %v, want one series", name, f)
			continue
		}
		m := f.GetMetric()[0]
		if v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetSummary().GetSampleCount()) + m.GetUntyped().GetValue(); v <= 0 && name != "go_gc_duration_seconds" {
			t.Errorf("%s = %v, want more than 0", name, v)
		}
	}
	if families["go_memstats_alloc_bytes_total"].GetType() != dto.MetricType_COUNTER || families["go_gc_duration_seconds"].GetType() != dto.MetricType_SUMMARY {
		t.Error("go_memstats_alloc_bytes_total is not a counter, or go_gc_duration_seconds not a summary")
	}
	if v := families["go_info"].GetMetric()[0].GetLabel(); len(v) != 1 || v[0].GetValue() != runtime.Version() {
		t.Errorf("go_info labels %v, want version %s", v, runtime.Version())
	}
}

// BenchmarkScrape is one /metrics body of a daemon watching one server.
func BenchmarkScrape(b *testing.B) {
	s := NewSet()
	s.For("http://127.0.0.1:4096").Attempts.Inc()
	ready := []Readiness{{URL: "http://127.0.0.1:4096", Ready: true, Reason: ReasonReady}}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := s.WriteTo(&buf, ready); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes/scrape")
}
