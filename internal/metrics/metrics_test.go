package metrics

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Each server's metrics carry its url label, in one registry.
func TestEveryMetricCarriesTheURL(t *testing.T) {
	s := NewSet()
	a, b := s.For("http://127.0.0.1:4096"), s.For("http://127.0.0.1:49374")
	a.Attempts.Add(2)
	b.Attempts.Inc()
	b.ArmedDirectories.Set(5)
	families, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if len(f.GetName()) < len("mcp_reconnect_") || f.GetName()[:len("mcp_reconnect_")] != "mcp_reconnect_" {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "url" {
				t.Fatalf("%s has labels %v, want url only", f.GetName(), m.GetLabel())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			got[f.GetName()+" "+m.GetLabel()[0].GetValue()] = v
		}
	}
	for k, want := range map[string]float64{
		"mcp_reconnect_connect_attempts_total http://127.0.0.1:4096":  2,
		"mcp_reconnect_connect_attempts_total http://127.0.0.1:49374": 1,
		"mcp_reconnect_armed_directories http://127.0.0.1:49374":      5,
		"mcp_reconnect_armed_directories http://127.0.0.1:4096":       0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
}

// The readiness gauges are read at each scrape: one series per server,
// one reason each, and two entries of one URL make one server.
func TestReadinessCollector(t *testing.T) {
	now := []Readiness{
		{URL: "http://127.0.0.1:4096", Ready: true, Reason: ReasonReady},
		{URL: "http://127.0.0.1:4196", Ready: false, Reason: ReasonStreamDisconnected},
		{URL: "http://127.0.0.1:4196", Ready: true, Reason: ReasonReady},
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewReadinessCollector(func() []Readiness { return now }))
	gather := func() map[string]float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, l := range m.GetLabel() {
					key += " " + l.GetName() + "=" + l.GetValue()
				}
				got[key] = m.GetGauge().GetValue()
			}
		}
		return got
	}
	want := map[string]float64{
		"mcp_reconnect_ready url=http://127.0.0.1:4096":                                   1,
		"mcp_reconnect_ready url=http://127.0.0.1:4196":                                   0,
		"mcp_reconnect_ready_reason reason=ready url=http://127.0.0.1:4096":               1,
		"mcp_reconnect_ready_reason reason=stream_disconnected url=http://127.0.0.1:4196": 1,
	}
	if got := gather(); !reflect.DeepEqual(got, want) {
		t.Errorf("gathered %v, want %v", got, want)
	}
	now = now[:1]
	now[0] = Readiness{URL: "http://127.0.0.1:4096", Reason: ReasonNotDetected}
	want = map[string]float64{
		"mcp_reconnect_ready url=http://127.0.0.1:4096":                            0,
		"mcp_reconnect_ready_reason reason=not_detected url=http://127.0.0.1:4096": 1,
	}
	if got := gather(); !reflect.DeepEqual(got, want) {
		t.Errorf("after a change: gathered %v, want %v", got, want)
	}
}
