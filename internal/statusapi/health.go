package statusapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// The health routes are for supervisors that only see a process:
// Kubernetes probes, launchd or a load balancer. GET /healthz answers
// whether the daemon works at all (it serves, and no engine is stuck: a
// restart would help), GET /readyz whether it does its job right now
// (every OpenCode server it watches was found and its event stream is
// connected: a restart would not help, OpenCode is down); /metrics shows
// readyz per server too (mcp_reconnect_ready, mcp_reconnect_ready_reason),
// for a supervisor that must not gate anything on it. They obey the
// same Host rules as every route (run with --status-public where the
// kubelet asks by the pod's address) and show no secret.

// healthTimeout bounds how long a health route waits for an engine: less
// than the one second a Kubernetes probe waits by default.
const healthTimeout = 500 * time.Millisecond

// Health is the body of GET /healthz and GET /readyz.
type Health struct {
	// OK is true when the route answers 200.
	OK      bool             `json:"ok"`
	Servers []OpenCodeHealth `json:"servers"`
}

// OpenCodeHealth is one watched OpenCode server in Health.
type OpenCodeHealth struct {
	URL string `json:"url"`
	OK  bool   `json:"ok"`
	// Generation is the OpenCode generation detected, "" while none was.
	Generation string `json:"generation,omitempty"`
	// StreamConnected says whether its event stream is connected (readyz).
	StreamConnected bool `json:"stream_connected"`
	// Problem says what is wrong when not OK.
	Problem string `json:"problem,omitempty"`
}

// healthz is 200 unless an engine is stuck (reconnect.Stuck, as for the
// systemd watchdog): its lock held, a loop that stopped turning, or an
// engine that stopped; one not started yet is not. OpenCode being down is
// no reason to restart the daemon, so it is not asked about here.
func (s *API) healthz(w http.ResponseWriter, _ *http.Request) {
	h := Health{OK: true, Servers: []OpenCodeHealth{}}
	for _, src := range s.Sources {
		sh := OpenCodeHealth{URL: src.CurrentURL(), OK: true}
		if err := src.Alive(healthTimeout); reconnect.Stuck(err) {
			sh.OK, sh.Problem, h.OK = false, err.Error(), false
		}
		h.Servers = append(h.Servers, sh)
	}
	writeHealth(w, h)
}

// readyz is 200 when every watched server was detected and its event
// stream is connected, else 503 naming each server that is not and why.
func (s *API) readyz(w http.ResponseWriter, _ *http.Request) {
	h := Health{OK: len(s.Sources) > 0, Servers: []OpenCodeHealth{}}
	for _, src := range s.Sources {
		sh, _ := readiness(src)
		h.OK = h.OK && sh.OK
		h.Servers = append(h.Servers, sh)
	}
	writeHealth(w, h)
}

// metrics serves /metrics: the daemon's metrics, with the readiness
// gauges (mcp_reconnect_ready, mcp_reconnect_ready_reason) as readyz
// would answer now. Uncompressed: a scrape is a few KiB over loopback,
// and a gzip writer per scrape allocated about 600 KiB (BENCHMARKS.md,
// "Memory at scale").
func (s *API) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", metrics.ContentType)
	_ = s.Metrics.WriteTo(w, s.readinessMetrics()) // fails only when the scraper went away
}

// readinessMetrics is what readyz would answer, for the gauges on
// /metrics.
func (s *API) readinessMetrics() []metrics.Readiness {
	out := make([]metrics.Readiness, 0, len(s.Sources))
	for _, src := range s.Sources {
		sh, reason := readiness(src)
		out = append(out, metrics.Readiness{URL: sh.URL, Ready: sh.OK, Reason: reason})
	}
	return out
}

// readiness is one server's part of readyz, and the reason as one of the
// metrics.Reason words.
func readiness(src Source) (OpenCodeHealth, string) {
	sh := OpenCodeHealth{URL: src.CurrentURL()}
	// Before Stream, which waits for the engine's lock.
	switch err := src.Alive(healthTimeout); {
	case errors.Is(err, reconnect.ErrNotStarted):
		sh.Problem = "starting: the engine does not run yet"
		return sh, metrics.ReasonStarting
	case err != nil:
		sh.Problem = err.Error()
		return sh, metrics.ReasonStuck
	}
	stream := src.Stream()
	sh.StreamConnected, sh.Generation = stream.Connected, src.Generation()
	switch {
	case sh.Generation == "":
		sh.Problem = "not detected yet: nothing at " + sh.URL + " has answered as OpenCode"
		return sh, metrics.ReasonNotDetected
	case !stream.Connected:
		sh.Problem = "event stream not connected"
		if stream.LastError != "" {
			sh.Problem += ": " + stream.LastError
		}
		return sh, metrics.ReasonStreamDisconnected
	}
	sh.OK = true
	return sh, metrics.ReasonReady
}

func writeHealth(w http.ResponseWriter, h Health) {
	w.Header().Set("Cache-Control", "no-store")
	code := http.StatusOK
	if !h.OK {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}
