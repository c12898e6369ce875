package metrics

import "testing"

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
