package opencode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
)

// What a ClientV2 learns of one OpenCode 2 process and keeps across its
// detections (processMemory), and how it reads that process's API
// description (GET /openapi.json, with backoff while the reads fail) and
// reports the capabilities it offers. Which route each capability takes
// from a description is routes2.go's.

// retry is the backoff of something that failed: how often in a row, and
// when to try it again.
type retry struct {
	n     int
	again time.Time
}

// retryPolicy spaces the reads of a description that failed, and the
// requests of a route that answered as missing: 1 s, doubling to a minute.
var retryPolicy = backoff.Policy{Initial: time.Second, Max: time.Minute, Jitter: 0.2}

// fail counts one more failure and sets when to try again: the next
// backoff step, and no sooner than after (a server's Retry-After).
func (r *retry) fail(now time.Time, after time.Duration) time.Duration {
	r.n++
	d := max(retryPolicy.Jittered(retryPolicy.Base(r.n)), after)
	r.again = now.Add(d)
	return d
}

// processMemory is what the daemon learns of one OpenCode 2 process and
// keeps across its detections (every re-subscribe of the event stream
// detects again): the directory of each session seen on the stream (2.x
// sends session.execution.* without a location), and the routes that
// answered. A Server forgets it when another process answers.
type processMemory struct {
	desc     description
	sessions *sessionDirs
	answered sync.Map // "METHOD path" → true
}

// description is what the reads of one process's API description gave,
// shared by the clients of its detections.
type description struct {
	// read serialises the reads.
	read sync.Mutex

	mu sync.Mutex
	// gen counts the forgets: a read begun before one is another
	// process's, and is not kept.
	gen int
	rs  *routeSet // nil before the first read
	// doc and err are that read's outcome; retry the backoff of the
	// reads that failed, told whether the failure was logged.
	doc   *apidesc.Doc
	err   error
	retry retry
	told  bool
	// patienceTold: the checks that wait for it were told to wait no
	// longer (descriptionPatience), and the log said so.
	patienceTold bool
}

// descriptionPatience is how many failed reads of the description (about
// 30 s of them: 1 s doubling) the checks that need the booted locations
// wait for. After them the checks go on as without a description (as on
// 2.0.21, which lists no booted location): a description that never
// answers must not hold every repair of the directories OpenCode armed for
// as long as the process runs. The reads go on with backoff, and the list
// is used again once it answers.
const descriptionPatience = 5

func newProcessMemory() *processMemory { return &processMemory{sessions: newSessionDirs(maxSessions)} }

// forget empties the memory: OpenCode was replaced, and the description,
// sessions and routes of another process mean nothing.
func (m *processMemory) forget() {
	d := &m.desc
	d.mu.Lock()
	d.gen++
	d.rs, d.doc, d.err, d.retry, d.told, d.patienceTold = nil, nil, nil, retry{}, false, false
	d.mu.Unlock()
	m.sessions.forget()
	m.answered.Clear()
}

// has reports whether route answered this process.
func (m *processMemory) has(route string) bool {
	_, ok := m.answered.Load(route)
	return ok
}

// descriptionTimeout bounds a read of GET /openapi.json (about 300 KB on
// the preview build).
const descriptionTimeout = 5 * time.Second

// routes returns the route choices, reading the server's description at
// the first call for its process, and again once its backoff allows while
// the reads fail. Concurrent first calls wait for the one read; later ones
// use the defaults meanwhile. A read does not end with the caller's
// context (every later call depends on it), only with its own timeout.
func (v *ClientV2) routes(ctx context.Context) *routeSet {
	d := &v.mem.desc
	current := func() (*routeSet, bool, int) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.rs, d.rs == nil || d.rs.provisional && !time.Now().Before(d.retry.again), d.gen
	}
	rs, due, _ := current()
	switch {
	case !due:
		return rs
	case rs == nil:
		d.read.Lock()
	case !d.read.TryLock():
		return rs // being read again
	}
	defer d.read.Unlock()
	rs, due, gen := current()
	if !due {
		return rs
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(descriptionTimeout, v.c.timeout))
	defer cancel()
	body, err := v.Doc(rctx)
	var desc *apidesc.Doc
	if err == nil {
		desc, err = apidesc.Parse(body)
	}
	use, note, transient := desc, "", false
	var e *Error
	switch {
	case errors.As(err, &e) && e.Status == 0:
		transient, note = true, "GET /openapi.json failed: "+e.Detail // a timeout, a reset
	case errors.As(err, &e) && e.Status >= 200 && e.Status <= 299:
		// The answer began but its body could not be had (the
		// connection dropped mid-body): not the server's final word.
		transient, note = true, "GET /openapi.json was cut short: "+e.Detail
	case errors.Is(err, apidesc.ErrCutShort):
		// A body that ends inside its JSON was cut short where nothing
		// told its length (a close-delimited answer): read it again,
		// as after a 503. (One that is no JSON at all, a web UI's
		// page, is an answer: no description.)
		transient, note = true, "GET /openapi.json was cut short: "+err.Error()
	case errors.As(err, &e):
		// A busy or starting server (5xx, 429, 408) has a description
		// still to come; a 404 or 405 says it has none, and a refused
		// password fails every call (the next detection asks again).
		transient = e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
		note = fmt.Sprintf("GET /openapi.json answered %d", e.Status)
	case err != nil:
		note = "GET /openapi.json is unreadable: " + err.Error()
	case !offersAPI(desc):
		use, note = nil, "GET /openapi.json is unreadable: lists no /api/ route: not an OpenCode 2 description"
	}
	rs = chooseRoutes(use, note, transient)
	d.mu.Lock()
	if d.gen != gen {
		// Another process answers now: this read was the old one's.
		d.mu.Unlock()
		return rs
	}
	d.rs, d.doc, d.err = rs, desc, err
	warn := false
	if transient {
		after, _ := RetryAfter(err)
		in := d.retry.fail(time.Now(), after)
		warn, d.told = !d.told, true
		note += fmt.Sprintf("; asked again in %s", in.Round(time.Millisecond))
	}
	d.mu.Unlock()
	if warn {
		v.logger().Warn("OpenCode 2 API description unreadable; using the default routes, and checks that need the booted locations wait, until it answers",
			"url", v.URL(), "why", note)
	}
	if !transient {
		v.logCapabilities(rs)
	}
	return rs
}

// offersAPI reports whether a description lists a route under /api/, as
// OpenCode 2's do.
func offersAPI(d *apidesc.Doc) bool {
	return slices.ContainsFunc(d.Paths(), func(p string) bool { return strings.HasPrefix(p, "/api/") })
}

// Description returns the server's API description as the client read it
// (reading it first if no call did yet), or why there is none.
func (v *ClientV2) Description(ctx context.Context) (*apidesc.Doc, error) {
	v.routes(ctx)
	d := &v.mem.desc
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.doc, d.err
}

// logCapabilities says, once per answer of the description, which route
// each capability uses, and what the daemon runs without.
func (v *ClientV2) logCapabilities(rs *routeSet) {
	attrs := []any{"url", v.URL()}
	if rs.doc != nil {
		attrs = append(attrs, "description", fmt.Sprintf("%d paths", len(rs.doc.Paths())))
	} else {
		attrs = append(attrs, "description", "none: "+rs.docNote+"; using the defaults")
	}
	var without []string
	for _, c := range v.capabilities(rs) {
		if c.Available() {
			attrs = append(attrs, c.Name, c.Route)
		} else {
			attrs = append(attrs, c.Name, "none ("+c.Missing+")")
			without = append(without, c.Name)
		}
	}
	if len(without) > 0 {
		attrs = append(attrs, "running_without", strings.Join(without, ","))
	}
	v.logger().Info("OpenCode 2 routes", attrs...)
}

// Capabilities reports, for each thing the daemon uses, the route this
// server offers for it, or why it has none (reading the server's API
// description first if no call did yet). It never reads it again: status
// asks it, and must not wait for a description being retried.
func (v *ClientV2) Capabilities(ctx context.Context) []Capability {
	v.mem.desc.mu.Lock()
	rs := v.mem.desc.rs
	v.mem.desc.mu.Unlock()
	if rs == nil {
		rs = v.routes(ctx)
	}
	return v.capabilities(rs)
}

func (v *ClientV2) capabilities(rs *routeSet) []Capability {
	v.mem.desc.mu.Lock()
	impatient := v.mem.desc.retry.n >= descriptionPatience
	v.mem.desc.mu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	out := make([]Capability, 0, len(rs.choices))
	for _, c := range rs.choices {
		cp := Capability{Name: c.name, FromDescription: c.fromDoc, Missing: c.missing, Without: c.without}
		if c.name == CapLocations && rs.provisional && v.mem.has("GET "+routeLocations) {
			cp.Route, cp.Missing, cp.Without = "GET "+routeLocations, "", "" // it answered before
		} else if c.name == CapLocations && rs.provisional && impatient {
			cp.Without = fmt.Sprintf("checks of directories OpenCode armed waited for it %d reads and now go on without it: a disposed location cannot be told from a booted one without booting it", descriptionPatience)
		}
		var gone []string
		for _, p := range c.paths {
			if r := v.missing[c.method+" "+p]; r != nil && now.Before(r.again) {
				gone = append(gone, fmt.Sprintf("%s %s (asked again in %s)", c.method, p, r.again.Sub(now).Round(time.Millisecond)))
				continue
			}
			cp.Route = c.method + " " + p
			break
		}
		if cp.Route != "" {
			cp.Missing, cp.Without = "", ""
		} else if len(gone) > 0 {
			cp.Missing = strings.Join(gone, " and ") + " answered 404 (no such route)"
			cp.Without = withoutCap[c.name]
		}
		out = append(out, cp)
	}
	return out
}

// capability is one capability's state.
func (v *ClientV2) capability(ctx context.Context, name string) Capability {
	for _, c := range v.Capabilities(ctx) {
		if c.Name == name {
			return c
		}
	}
	return Capability{Name: name, Missing: "unknown capability"}
}

// patienceOver reports whether the description failed
// descriptionPatience reads in a row, and warns the first time.
func (v *ClientV2) patienceOver() bool {
	d := &v.mem.desc
	d.mu.Lock()
	n, note := d.retry.n, ""
	over := n >= descriptionPatience
	first := over && !d.patienceTold
	if first {
		d.patienceTold = true
		if d.rs != nil {
			note = d.rs.docNote
		}
	}
	d.mu.Unlock()
	if first {
		v.logger().Warn("OpenCode 2 API description still unreadable; checks of directories OpenCode armed no longer wait for it and read them as without one: a location disposed meanwhile boots again",
			"url", v.URL(), "failed_reads", n, "why", note)
	}
	return over
}
