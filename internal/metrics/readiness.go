package metrics

import "github.com/prometheus/client_golang/prometheus"

// Readiness is what GET /readyz says of one watched OpenCode server, as
// the gauges mcp_reconnect_ready and mcp_reconnect_ready_reason show it.
// A supervisor that must not gate anything on it (a Kubernetes sidecar:
// a readiness probe there takes OpenCode's pod out of its Service) can
// alert on these instead.
type Readiness struct {
	// URL names the server (the url label).
	URL string
	// Ready is true when /readyz counts the server ready.
	Ready bool
	// Reason is one of the Reason constants.
	Reason string
}

// The reasons of mcp_reconnect_ready_reason: a few fixed words, so that
// the label stays a small set (the problem's full text is in /readyz).
const (
	// ReasonReady: detected, and its event stream connected.
	ReasonReady = "ready"
	// ReasonStarting: the server's engine does not run yet.
	ReasonStarting = "starting"
	// ReasonStuck: the engine no longer turns (/healthz fails too).
	ReasonStuck = "stuck"
	// ReasonNotDetected: nothing at the URL has answered as OpenCode
	// (down, or a wrong password).
	ReasonNotDetected = "not_detected"
	// ReasonStreamDisconnected: OpenCode was found, its event stream is
	// not connected.
	ReasonStreamDisconnected = "stream_disconnected"
)

var (
	readyDesc = prometheus.NewDesc("mcp_reconnect_ready",
		"1 when the OpenCode server was detected and its event stream is connected (GET /readyz counts it ready), else 0.",
		[]string{"url"}, nil)
	readyReasonDesc = prometheus.NewDesc("mcp_reconnect_ready_reason",
		"1 for the reason the OpenCode server is or is not ready: ready, starting, stuck, not_detected or stream_disconnected.",
		[]string{"url", "reason"}, nil)
)

// readinessCollector asks for the readiness at every scrape, so the gauges
// are what /readyz would answer at that moment.
type readinessCollector struct{ read func() []Readiness }

// NewReadinessCollector returns the collector of mcp_reconnect_ready and
// mcp_reconnect_ready_reason, which calls read at each scrape. Two
// entries of one URL are one server: ready when both are, with the first
// reason that is not ReasonReady.
func NewReadinessCollector(read func() []Readiness) prometheus.Collector {
	return readinessCollector{read: read}
}

func (c readinessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- readyReasonDesc
}

func (c readinessCollector) Collect(ch chan<- prometheus.Metric) {
	var order []string
	byURL := map[string]Readiness{}
	for _, r := range c.read() {
		prev, seen := byURL[r.URL]
		switch {
		case !seen:
			order = append(order, r.URL)
			byURL[r.URL] = r
		case prev.Ready && !r.Ready:
			byURL[r.URL] = r
		}
	}
	for _, url := range order {
		r := byURL[url]
		v := 0.0
		if r.Ready {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, v, url)
		ch <- prometheus.MustNewConstMetric(readyReasonDesc, prometheus.GaugeValue, 1, url, r.Reason)
	}
}
