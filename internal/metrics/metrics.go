// Package metrics defines the daemon's metrics in one place, so the
// engine, the event stream and the status API count the same things under
// the same names, and writes them in Prometheus' text format. One daemon
// may watch several OpenCode servers: every metric carries a `url` label
// naming the server it is about.
//
// The format is written here rather than by the Prometheus client: the
// client and the protobuf runtime it needs were about 2 MiB of the
// daemon's binary, and a Go binary's pages are most of what is resident
// once it runs (BENCHMARKS.md, "Memory at scale, third round"). The
// package test reads what it writes with Prometheus' own parser.
package metrics

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Counter counts up from 0. The zero value is ready; it is safe for
// concurrent use.
type Counter struct{ n atomic.Uint64 }

// Inc adds 1.
func (c *Counter) Inc() { c.n.Add(1) }

// Value is the count.
func (c *Counter) Value() uint64 { return c.n.Load() }

// Gauge is a number that goes up and down. The zero value is ready; it is
// safe for concurrent use.
type Gauge struct{ n atomic.Int64 }

// Inc adds 1.
func (g *Gauge) Inc() { g.n.Add(1) }

// Dec takes 1 away.
func (g *Gauge) Dec() { g.n.Add(-1) }

// Set makes the gauge n.
func (g *Gauge) Set(n int) { g.n.Store(int64(n)) }

// Value is the gauge's number.
func (g *Gauge) Value() int64 { return g.n.Load() }

// Metrics are the counters and gauges of one OpenCode server.
type Metrics struct {
	Attempts           Counter
	Reconnects         Counter
	GiveUps            Counter
	ArmedDirectories   Gauge
	InFlightConnects   Gauge
	StreamReconnects   Counter
	StatusReadFailures Counter
	StatusReads        Counter
	Probes             Counter
	Toasts             Counter
}

// family is one metric of Metrics: its name, help and value.
type family struct {
	name, help, typ string
	value           func(*Metrics) int64
}

// families are the server metrics, by name.
var families = []family{
	{"mcp_reconnect_armed_directories", "Directories currently watched.", "gauge", func(m *Metrics) int64 { return m.ArmedDirectories.Value() }},
	{"mcp_reconnect_connect_attempts_total", "Connect calls made to OpenCode for failed MCP servers.", "counter", func(m *Metrics) int64 { return int64(m.Attempts.Value()) }},
	{"mcp_reconnect_connects_in_flight", "Connect calls currently waiting for OpenCode.", "gauge", func(m *Metrics) int64 { return m.InFlightConnects.Value() }},
	{"mcp_reconnect_event_stream_reconnects_total", "Times the event stream was subscribed again after a drop.", "counter", func(m *Metrics) int64 { return int64(m.StreamReconnects.Value()) }},
	{"mcp_reconnect_give_ups_total", "MCP servers that spent their fast episode and dropped to the slow tier.", "counter", func(m *Metrics) int64 { return int64(m.GiveUps.Value()) }},
	{"mcp_reconnect_probes_total", "Reachability probes of failed remote MCP endpoints.", "counter", func(m *Metrics) int64 { return int64(m.Probes.Value()) }},
	{"mcp_reconnect_reconnects_total", "Failed MCP servers seen connected again after a connect attempt.", "counter", func(m *Metrics) int64 { return int64(m.Reconnects.Value()) }},
	{"mcp_reconnect_status_read_failures_total", "MCP status reads that failed, timed out or answered garbage.", "counter", func(m *Metrics) int64 { return int64(m.StatusReadFailures.Value()) }},
	{"mcp_reconnect_status_reads_total", "MCP status reads made.", "counter", func(m *Metrics) int64 { return int64(m.StatusReads.Value()) }},
	{"mcp_reconnect_toasts_total", "Toasts shown in an attached TUI (reconnected, slow tier).", "counter", func(m *Metrics) int64 { return int64(m.Toasts.Value()) }},
}

// Set is the metrics of every server a daemon watches.
type Set struct {
	mu      sync.Mutex
	urls    []string // sorted
	servers map[string]*Metrics
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{servers: map[string]*Metrics{}} }

// For returns the metrics of the OpenCode server at url: the same ones for
// the same url.
func (s *Set) For(url string) *Metrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.servers[url]; m != nil {
		return m
	}
	m := &Metrics{}
	s.servers[url] = m
	i, _ := slices.BinarySearch(s.urls, url)
	s.urls = slices.Insert(s.urls, i, url)
	return m
}

// New returns the metrics of one server (url label "") in a set of its
// own.
func New() *Metrics { return NewSet().For("") }

// ContentType is the type of what WriteTo writes: Prometheus' text format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// WriteTo writes every metric in Prometheus' text format: the servers',
// the readiness gauges of ready, and the daemon's own (Go runtime,
// process).
func (s *Set) WriteTo(out io.Writer, ready []Readiness) error {
	w := bufio.NewWriter(out)
	writeRuntime(w)
	s.mu.Lock()
	urls := slices.Clone(s.urls)
	servers := make([]*Metrics, len(urls))
	for i, u := range urls {
		servers[i] = s.servers[u]
	}
	s.mu.Unlock()
	for _, f := range families {
		header(w, f.name, f.help, f.typ)
		for i, m := range servers {
			series(w, f.name, urls[i], "", f.value(m))
		}
	}
	writeReadiness(w, ready)
	writeProcess(w)
	return w.Flush()
}

// header writes a metric's HELP and TYPE lines.
func header(w *bufio.Writer, name, help, typ string) {
	w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

// series writes one sample of name labelled url (and reason, unless
// empty; labels in the order of their names, as Prometheus' client
// writes them).
func series(w *bufio.Writer, name, url, reason string, v int64) {
	w.WriteString(name + "{")
	if reason != "" {
		w.WriteString(`reason="` + label(reason) + `",`)
	}
	w.WriteString(`url="` + label(url) + `"} ` + strconv.FormatInt(v, 10) + "\n")
}

// label escapes a label value as the text format wants it: UTF-8, with
// backslashes, quotes and line breaks escaped. A URL comes from the user,
// and may hold anything.
func label(v string) string { return labelEscapes.Replace(strings.ToValidUTF8(v, "\uFFFD")) }

var labelEscapes = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
