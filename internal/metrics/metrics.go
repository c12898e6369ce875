// Package metrics defines the daemon's Prometheus metrics in one place, so
// the engine, the event stream and the status API count the same things
// under the same names.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the daemon's counters and gauges.
type Metrics struct {
	// Registry holds every metric below; /metrics serves it.
	Registry *prometheus.Registry

	Attempts           prometheus.Counter
	Reconnects         prometheus.Counter
	GiveUps            prometheus.Counter
	ArmedDirectories   prometheus.Gauge
	InFlightConnects   prometheus.Gauge
	StreamReconnects   prometheus.Counter
	StatusReadFailures prometheus.Counter
	StatusReads        prometheus.Counter
	Probes             prometheus.Counter
	Toasts             prometheus.Counter
}

// New creates the metrics in a fresh registry (with the Go and process
// collectors, so memory and CPU are visible too).
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		Attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_reconnect_connect_attempts_total", Help: "Connect calls made to OpenCode for failed MCP servers.",
		}),
		Reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_reconnect_reconnects_total", Help: "Failed MCP servers seen connected again after a connect attempt.",
		}),
		GiveUps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_reconnect_give_ups_total", Help: "MCP servers that spent their fast episode and dropped to the slow tier.",
		}),
		ArmedDirectories: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcp_reconnect_armed_directories", Help: "Directories currently watched.",
		}),
		InFlightConnects: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcp_reconnect_connects_in_flight", Help: "Connect calls currently waiting for OpenCode.",
		}),
		StreamReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_reconnect_event_stream_reconnects_total", Help: "Times /global/event was subscribed again after a drop.",
		}),
		StatusReadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_reconnect_status_read_failures_total", Help: "GET /mcp calls that failed, timed out or answered garbage.",
		}),
		StatusReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_reconnect_status_reads_total", Help: "GET /mcp calls made.",
		}),
		Toasts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_reconnect_toasts_total", Help: "Toasts shown in an attached TUI (reconnected, slow tier).",
		}),
		Probes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_reconnect_probes_total", Help: "Reachability probes of failed remote MCP endpoints.",
		}),
	}
	reg.MustRegister(m.Attempts, m.Reconnects, m.GiveUps, m.ArmedDirectories, m.InFlightConnects,
		m.StreamReconnects, m.StatusReadFailures, m.StatusReads, m.Probes, m.Toasts,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}
