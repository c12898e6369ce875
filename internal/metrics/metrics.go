// Package metrics defines the daemon's Prometheus metrics in one place, so
// the engine, the event stream and the status API count the same things
// under the same names. One daemon may watch several OpenCode servers:
// every metric carries a `url` label naming the server it is about.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the counters and gauges of one OpenCode server.
type Metrics struct {
	// Registry holds every metric of every server; /metrics serves it.
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

// Set is the metrics of every server a daemon watches, in one registry.
type Set struct {
	// Registry holds every metric below (and the Go and process
	// collectors, so memory and CPU are visible too).
	Registry *prometheus.Registry

	attempts, reconnects, giveUps, streamReconnects *prometheus.CounterVec
	statusReadFailures, statusReads, probes, toasts *prometheus.CounterVec
	armed, inFlight                                 *prometheus.GaugeVec
}

// NewSet creates the metrics in a fresh registry.
func NewSet() *Set {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"url"})
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"url"})
	}
	s := &Set{
		Registry:           prometheus.NewRegistry(),
		attempts:           counter("mcp_reconnect_connect_attempts_total", "Connect calls made to OpenCode for failed MCP servers."),
		reconnects:         counter("mcp_reconnect_reconnects_total", "Failed MCP servers seen connected again after a connect attempt."),
		giveUps:            counter("mcp_reconnect_give_ups_total", "MCP servers that spent their fast episode and dropped to the slow tier."),
		armed:              gauge("mcp_reconnect_armed_directories", "Directories currently watched."),
		inFlight:           gauge("mcp_reconnect_connects_in_flight", "Connect calls currently waiting for OpenCode."),
		streamReconnects:   counter("mcp_reconnect_event_stream_reconnects_total", "Times the event stream was subscribed again after a drop."),
		statusReadFailures: counter("mcp_reconnect_status_read_failures_total", "MCP status reads that failed, timed out or answered garbage."),
		statusReads:        counter("mcp_reconnect_status_reads_total", "MCP status reads made."),
		toasts:             counter("mcp_reconnect_toasts_total", "Toasts shown in an attached TUI (reconnected, slow tier)."),
		probes:             counter("mcp_reconnect_probes_total", "Reachability probes of failed remote MCP endpoints."),
	}
	s.Registry.MustRegister(s.attempts, s.reconnects, s.giveUps, s.armed, s.inFlight,
		s.streamReconnects, s.statusReadFailures, s.statusReads, s.probes, s.toasts,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return s
}

// For returns the metrics of the OpenCode server at url.
func (s *Set) For(url string) *Metrics {
	return &Metrics{
		Registry:           s.Registry,
		Attempts:           s.attempts.WithLabelValues(url),
		Reconnects:         s.reconnects.WithLabelValues(url),
		GiveUps:            s.giveUps.WithLabelValues(url),
		ArmedDirectories:   s.armed.WithLabelValues(url),
		InFlightConnects:   s.inFlight.WithLabelValues(url),
		StreamReconnects:   s.streamReconnects.WithLabelValues(url),
		StatusReadFailures: s.statusReadFailures.WithLabelValues(url),
		StatusReads:        s.statusReads.WithLabelValues(url),
		Probes:             s.probes.WithLabelValues(url),
		Toasts:             s.toasts.WithLabelValues(url),
	}
}

// New creates the metrics of one server (url label "") in a fresh
// registry.
func New() *Metrics { return NewSet().For("") }
