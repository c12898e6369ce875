// Package probe tells cheaply whether a remote MCP server's endpoint
// answers: a TCP connect to its host and port, plus a TLS handshake for
// https. It sends no MCP request and no credential, so it can run often
// while a server is down, and the engine connects the server the moment
// its endpoint comes back instead of waiting out its backoff.
package probe

import (
	"cmp"
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

// Target returns the host:port a probe of rawURL dials, and whether TLS is
// used.
func Target(rawURL string) (addr string, useTLS bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", false, fmt.Errorf("probe: %q is not a URL with a host", rawURL)
	}
	port, ok := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	if !ok {
		return "", false, fmt.Errorf("probe: scheme %q is not http or https", u.Scheme)
	}
	return net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), port)), u.Scheme == "https", nil
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

// Hold floors: after a held connection that lived less than the floor, and
// two short holds before it, Watch waits out the rest of the floor before the
// next dial, and the floor doubles with each such short hold, from MinHold
// to MaxHold; a hold of MaxHold or longer resets it. An endpoint that accepts and closes at once (an ssh -L or a kubectl
// port-forward whose backend is down, a proxy at its connection limit)
// would otherwise be dialed thousands of times a second; now it is dialed
// twice a minute. A server that closes idle connections (after 5 s for
// uvicorn's keep-alive, a minute or more for most) is dialed once per
// close and held nearly all the time, so its restart is still seen.
const (
	MinHold = time.Second
	MaxHold = 30 * time.Second
)

// Watch watches the endpoint of a remote server that OpenCode calls
// connected, to notice a restart OpenCode itself misses (it keeps a dead
// session and still says connected). It holds one idle TCP connection to
// the endpoint: a server process that exits closes it at once. When it
// closes, Watch dials again (at once, unless this connection and the two
// before it lived less than the hold floor; every dial within the
// prober's rate): a server that merely closed an idle connection answers,
// and holding resumes; a restarting one refuses, and Watch calls down and
// probes until the endpoint answers again. It returns true then (the server restarted), or
// false when ctx ends.
func (p *Prober) Watch(ctx context.Context, rawURL string, down func()) bool {
	addr, _, err := Target(rawURL)
	if err != nil {
		<-ctx.Done()
		return false
	}
	floor, shorts := MinHold, 0
	for {
		if err := p.limit.Wait(ctx); err != nil {
			// ctx ended, or a rate of zero: no dial may ever run.
			<-ctx.Done()
			return false
		}
		lived, ok := p.hold(ctx, addr)
		if ctx.Err() != nil {
			return false
		}
		if !ok {
			break // refused: the server is down (restarting, we hope)
		}
		if lived >= floor {
			// Not short. Between the floor and MaxHold (a server whose
			// idle timeout is a few seconds) the floor stays: such a
			// server is held nearly all the time, so its restart is
			// still seen, and it cannot be dialed faster than the floor.
			shorts = 0
			if lived >= MaxHold {
				floor = MinHold
			}
			continue
		}
		// Short. The first two in a row re-dial at once: the server may
		// have exited moments after we connected, and a refused dial is
		// what tells. Its exit may end two holds: the one held (short if
		// dialled less than the floor before), and one dialled into its
		// listener's queue as the connection closed, gone with the
		// listener. Repeated ones wait out the floor and grow it.
		if shorts++; shorts > 2 {
			wait := floor - lived
			floor = min(2*floor, MaxHold)
			if !sleep(ctx, wait) {
				return false
			}
		}
	}
	if down != nil {
		down()
	}
	since := time.Now()
	for {
		if !sleep(ctx, Interval(time.Since(since))) {
			return false
		}
		if p.limit.Allow() && p.Probe(ctx, rawURL) == nil {
			return true
		}
	}
}

// sleep waits d, or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// hold dials addr and waits until the connection closes or ctx ends. It
// reports whether a connection was made, and how long it stayed open.
func (p *Prober) hold(ctx context.Context, addr string) (lived time.Duration, ok bool) {
	dctx, cancel := context.WithTimeout(ctx, Timeout)
	conn, err := p.Dial(dctx, "tcp", addr)
	cancel()
	if err != nil {
		return 0, false
	}
	start := time.Now()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			return time.Since(start), true
		}
	}
}
