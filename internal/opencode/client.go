// Package opencode is a typed client for the few OpenCode server routes the
// daemon uses (health, MCP status and connect, config, the global event
// stream). Every call has a timeout and a body limit, and every failure is
// sorted into what the caller can do about it: ErrUnavailable (try later),
// ErrUnauthorized (tell the user, stop hammering) or ErrNotFound; a refused
// connection (nothing listening) is also ErrRefused.
package opencode

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors a call can match with errors.Is.
var (
	// ErrUnavailable: the server could not be reached, timed out, answered
	// 5xx or sent something that is not the expected JSON. Retry later and
	// treat nothing as learned.
	ErrUnavailable = errors.New("opencode unavailable")
	// ErrUnauthorized: the server answered 401 or 403.
	ErrUnauthorized = errors.New("opencode refused the credentials")
	// ErrNotFound: the server answered 404 (for connect: no such MCP server).
	ErrNotFound = errors.New("not found")
	// ErrRefused: the connection was refused when dialing (ECONNREFUSED):
	// nothing listens at the address, so OpenCode is not running or is
	// restarting, unlike a timeout or a 5xx, which a running OpenCode can
	// cause. An error that is ErrRefused is ErrUnavailable too.
	ErrRefused = errors.New("opencode refused the connection")
	// ErrNotYet: OpenCode said "not yet": it answered 503 with a
	// Retry-After, as OpenCode 2 does while its service starts or stops
	// (its health route, and every other route with {"code":
	// "service_starting" | "service_stopping" | "service_failed"}). No MCP
	// server failed, and nothing is learned: keep every counter and look
	// again no sooner than the error's RetryAfter. An error that is
	// ErrNotYet is ErrUnavailable too.
	ErrNotYet = errors.New("opencode is not ready yet")
)

// maxRetryAfter caps the wait a Retry-After may ask for.
const maxRetryAfter = 5 * time.Minute

// RetryAfter is how long an ErrNotYet error asks to wait before the next
// request; ok is false for any other error.
func RetryAfter(err error) (d time.Duration, ok bool) {
	var e *Error
	if !errors.As(err, &e) || e.kind != ErrNotYet {
		return 0, false
	}
	return e.RetryAfter, true
}

// notYet reads a "not yet" answer: a 503 with a Retry-After in seconds
// (OpenCode sends "1"; capped at maxRetryAfter).
func notYet(status int, h http.Header) (time.Duration, bool) {
	n, err := strconv.ParseUint(strings.TrimSpace(h.Get("Retry-After")), 10, 32)
	if status != http.StatusServiceUnavailable || err != nil {
		return 0, false
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter), true
}

// maxBody bounds every response body the client reads.
const maxBody = 4 << 20

// readConns caps the connections used for short calls.
const readConns = 32

// Defaults for Client's timeouts.
const (
	// DefaultTimeout bounds a status, health or config call. The first
	// request for a directory waits until every MCP server there made its
	// first attempt, which takes up to 60 s for a silent remote URL, so a
	// short timeout here only turns a slow start into "unavailable", which
	// the engine handles.
	DefaultTimeout = 15 * time.Second
	// DefaultConnectTimeout bounds a connect call: OpenCode answers only
	// when its attempt is over, up to 60 s (30 s streamable HTTP, 30 s SSE).
	DefaultConnectTimeout = 75 * time.Second
)

// Client talks to one OpenCode server. Its zero value is not usable; use New.
type Client struct {
	base     *url.URL
	username string
	password string
	http     *http.Client // status, health, config
	long     *http.Client // connect and the event stream
	timeout  time.Duration
	// hint, when set, replaces the 1.x fix named for a refused password
	// (a 2.x client's: hintV2).
	hint string
}

// Options configure a Client. Zero fields take the defaults.
type Options struct {
	// Username for HTTP basic auth (default "opencode").
	Username string
	// Password for HTTP basic auth; empty sends no credentials.
	Password string
	// Timeout bounds each ordinary call (default DefaultTimeout).
	Timeout time.Duration
	// Transport replaces the HTTP transport (tests).
	Transport http.RoundTripper
}

// New returns a client for the server at rawURL.
func New(rawURL string, o Options) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("opencode url %q: want http://host:port", Redact(rawURL))
	}
	if u.User != nil {
		return nil, fmt.Errorf("opencode url %q: put credentials in --username/--password, not in the URL", Redact(rawURL))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, username: cmp.Or(o.Username, "opencode"), password: o.Password, timeout: o.Timeout}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	reads, long := o.Transport, o.Transport
	if reads == nil {
		// Reads and connects use separate connection pools. Reads come in
		// bursts (idle checks are batched) and are capped at readConns
		// connections, so a burst waits briefly instead of opening and
		// closing hundreds of connections. Connects can each hold a
		// connection for a minute; the connect budget bounds them, and
		// they must never starve reads (or the event stream) of a
		// connection.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = readConns
		t.MaxIdleConnsPerHost = readConns
		t.MaxConnsPerHost = readConns
		reads = t
		long = http.DefaultTransport.(*http.Transport).Clone()
	}
	// OpenCode never redirects; following one could carry the credentials
	// to another host.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &http.Client{Transport: reads, CheckRedirect: noRedirect}
	c.long = &http.Client{Transport: long, CheckRedirect: noRedirect}
	return c, nil
}

// URL is the server's base URL, safe to log.
func (c *Client) URL() string { return c.base.String() }

// Redact removes any userinfo from a URL string, for messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	if u.User != nil {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// Error is a failed call. It matches ErrUnavailable, ErrUnauthorized or
// ErrNotFound with errors.Is, and ErrRefused as well when the connection
// was refused. It never holds a credential.
type Error struct {
	// Op names the call, e.g. "GET /mcp".
	Op string
	// URL is the server's base URL.
	URL string
	// Status is the HTTP status, or 0 when none was received.
	Status int
	// Detail is a short description (a truncated body or a transport error).
	Detail string
	// RetryAfter is how long an ErrNotYet answer asked to wait.
	RetryAfter time.Duration
	kind       error
	refused    bool
	cause      error
	// hint, when set, replaces the 1.x fix named for a refused password.
	hint string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "opencode at %s", e.URL)
	if e.Op != "" { // "" when no route answered, or several did
		b.WriteString(": " + e.Op)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " answered %d", e.Status)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	switch {
	case e.hint != "":
		b.WriteString(" (" + e.hint + ")")
	case errors.Is(e.kind, ErrUnauthorized):
		b.WriteString(" (set --password or OPENCODE_SERVER_PASSWORD, and --username or OPENCODE_SERVER_USERNAME if not \"opencode\")")
	}
	return b.String()
}

// Is matches the error's kind, ErrRefused for a refused connection, and
// ErrUnavailable for ErrNotYet.
func (e *Error) Is(target error) bool {
	return target == e.kind || target == ErrRefused && e.refused || target == ErrUnavailable && e.kind == ErrNotYet
}

// transportError is the Error for a request that got no answer.
func (c *Client) transportError(ctx context.Context, op string, err error) *Error {
	return &Error{Op: op, URL: c.URL(), Detail: transportDetail(err), kind: ErrUnavailable, refused: isRefused(err), cause: ctxErr(ctx, err)}
}

// isRefused reports whether err is a dial that was refused: a TCP reset
// in answer to the SYN, which is what a port nobody listens on gets.
func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(op.Err, syscall.ECONNREFUSED)
}

// Unwrap returns the transport error, if any.
func (e *Error) Unwrap() error { return e.cause }

// do sends one request of the 1.x client and returns the body of a 2xx
// answer. op names the route for messages ("POST /mcp/{name}/connect");
// escPath is the path with every variable segment already escaped with
// url.PathEscape, so a server name holding a slash stays one segment.
// reqBody, when set, is sent as JSON.
func (c *Client) do(ctx context.Context, hc *http.Client, timeout time.Duration, op, method, escPath, query string, reqBody []byte) ([]byte, error) {
	status, body, err := c.send(ctx, hc, timeout, op, method, escPath, query, reqBody)
	if err != nil {
		return nil, err
	}
	if err := c.classify(op, status, body); err != nil {
		return nil, err
	}
	return body, nil
}

// classify sorts an answer of either generation into nil (2xx) or an
// *Error.
func (c *Client) classify(op string, status int, body []byte) error {
	switch {
	case status >= 200 && status <= 299:
		return nil
	case status == http.StatusForbidden && errorTag(body) == tagLocationDenied:
		// 2.x's 403 is about the directory (OpenCode may not read it), not
		// the credentials: telling the user to fix the password would
		// send them the wrong way.
		return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &Error{Op: op, URL: c.URL(), Status: status, kind: ErrUnauthorized, hint: c.hint}
	case status == http.StatusNotFound:
		return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrNotFound}
	}
	return &Error{Op: op, URL: c.URL(), Status: status, Detail: snippet(body), kind: ErrUnavailable}
}

// unexpected is the error for a 2xx answer that is not the expected JSON.
func (c *Client) unexpected(op string, err error) error {
	return &Error{Op: op, URL: c.URL(), Status: http.StatusOK, Detail: err.Error(), kind: ErrUnavailable}
}

// send sends one request and returns any HTTP answer's status and body
// (both generations classify the status their own way); err is set only
// when no answer arrived or it could not be read, and is ErrRefused too
// when the connection was refused, or when the answer is "not yet"
// (ErrNotYet, with the status and body). query is the encoded query
// (dirQuery); reqBody, when set, is sent as JSON.
func (c *Client) send(ctx context.Context, hc *http.Client, timeout time.Duration, op, method, escPath, query string, reqBody []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := c.request(ctx, method, escPath, query, "application/json")
	if err != nil {
		return 0, nil, &Error{Op: op, URL: c.URL(), Detail: "bad path: " + err.Error(), kind: ErrUnavailable}
	}
	if reqBody != nil {
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		req.ContentLength = int64(len(reqBody))
		req.Header.Set("Content-Type", "application/json")
	}
	// The transport itself: the client around it would copy the headers
	// for redirects, which are never followed (New).
	resp, err := hc.Transport.RoundTrip(req)
	if err != nil {
		var tlsErr tls.RecordHeaderError
		if errors.As(err, &tlsErr) && string(tlsErr.RecordHeader[:]) == "HTTP/" {
			err = http.ErrSchemeMismatch // an https URL of a plain-HTTP server, said as the client says it
		}
		return 0, nil, c.transportError(ctx, op, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, nil, &Error{Op: op, URL: c.URL(), Status: resp.StatusCode, Detail: "reading body: " + transportDetail(err), kind: ErrUnavailable, cause: ctxErr(ctx, err)}
	}
	if len(body) > maxBody {
		return 0, nil, &Error{Op: op, URL: c.URL(), Status: resp.StatusCode, Detail: "body larger than 4 MiB", kind: ErrUnavailable}
	}
	if d, ok := notYet(resp.StatusCode, resp.Header); ok {
		return resp.StatusCode, body, &Error{Op: op, URL: c.URL(), Status: resp.StatusCode, Detail: snippet(body), kind: ErrNotYet, RetryAfter: d}
	}
	return resp.StatusCode, body, nil
}

// request is a request of the route at escPath (escaped, see do) with the
// encoded query, the credentials and the Accept header.
func (c *Client) request(ctx context.Context, method, escPath, query, accept string) (*http.Request, error) {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + escPath
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, err
	}
	u.Path, u.RawQuery = p, query
	// Built directly rather than with NewRequest: formatting the URL only to
	// parse it again is a fifth of the client's cost per status read.
	req := (&http.Request{Method: method, URL: &u, Host: u.Host, Header: http.Header{},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}).WithContext(ctx)
	if c.password != "" {
		req.SetBasicAuth(c.username, c.password)
	}
	req.Header.Set("Accept", accept)
	return req, nil
}

// ctxErr prefers the context's reason (a deadline) over a transport message.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func transportDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

// snippet is the start of a body, for an error message. OpenCode's error
// bodies name the route and server, never a credential.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
