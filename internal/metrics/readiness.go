package metrics

import "bufio"

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

// writeReadiness writes mcp_reconnect_ready and mcp_reconnect_ready_reason
// of ready, read at this scrape, so the gauges are what /readyz would
// answer at this moment. Two entries of one URL are one server: ready when
// both are, with the first reason that is not ReasonReady.
func writeReadiness(w *bufio.Writer, ready []Readiness) {
	var order []string
	byURL := map[string]Readiness{}
	for _, r := range ready {
		prev, seen := byURL[r.URL]
		if !seen {
			order = append(order, r.URL)
		}
		if !seen || prev.Ready && !r.Ready {
			byURL[r.URL] = r
		}
	}
	header(w, "mcp_reconnect_ready", "1 when the OpenCode server was detected and its event stream is connected (GET /readyz counts it ready), else 0.", "gauge")
	for _, url := range order {
		v := int64(0)
		if byURL[url].Ready {
			v = 1
		}
		series(w, "mcp_reconnect_ready", url, "", v)
	}
	header(w, "mcp_reconnect_ready_reason", "1 for the reason the OpenCode server is or is not ready: ready, starting, stuck, not_detected or stream_disconnected.", "gauge")
	for _, url := range order {
		series(w, "mcp_reconnect_ready_reason", url, byURL[url].Reason, 1)
	}
}
