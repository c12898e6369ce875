// Package probe tells cheaply whether a remote MCP server's endpoint
// answers: a TCP connect to its host and port, plus a TLS handshake for
// https. It sends no MCP request and no credential, so it can run often
// while a server is down, and the engine connects the server the moment
// its endpoint comes back instead of waiting out its backoff.
package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"

	"golang.org/x/time/rate"
)

// Timeout bounds one probe.
const Timeout = time.Second

// Prober probes endpoints within a global rate.
type Prober struct {
	// Dial opens a connection (default: net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// limit bounds probes per second across every server.
	limit *rate.Limiter
}

// New returns a prober allowing perSecond probes a second (with that
// burst) across all servers.
func New(perSecond float64) *Prober {
	d := &net.Dialer{}
	return &Prober{Dial: d.DialContext, limit: rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond)))}
}

// Allow reports whether a probe may run now under the global rate.
func (p *Prober) Allow() bool { return p.limit.Allow() }

// Target returns the host:port a probe of rawURL dials, and whether TLS is
// used.
func Target(rawURL string) (addr string, useTLS bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", false, fmt.Errorf("probe: %q is not a URL with a host", rawURL)
	}
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		useTLS = true
		if port == "" {
			port = "443"
		}
	default:
		return "", false, fmt.Errorf("probe: scheme %q is not http or https", u.Scheme)
	}
	return net.JoinHostPort(u.Hostname(), port), useTLS, nil
}

// Probe reports whether rawURL's endpoint accepts a connection (and a TLS
// handshake for https) within Timeout.
func (p *Prober) Probe(ctx context.Context, rawURL string) error {
	addr, useTLS, err := Target(rawURL)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	conn, err := p.Dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if useTLS {
		host, _, _ := net.SplitHostPort(addr)
		// Reachability only: OpenCode verifies the certificate when it
		// connects; a probe that refused a private CA would hide a server
		// that is back.
		tc := tls.Client(conn, &tls.Config{ServerName: host, InsecureSkipVerify: true}) //nolint:gosec // a reachability probe, no data sent
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Interval is how long to wait before the next probe of an endpoint that
// has been down for downFor: every second for the first minute, then
// easing off by half again each time, to at most 30 s.
func Interval(downFor time.Duration) time.Duration {
	const first, ease, most = time.Second, time.Minute, 30 * time.Second
	if downFor <= ease {
		return first
	}
	d := first
	for t := ease; t < downFor && d < most; t += ease {
		d = d * 3 / 2
	}
	return min(d, most)
}
