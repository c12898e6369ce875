package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// OpenCode 2 runs one background service per user, shared by every TUI
// and CLI (docs/opencode.md#the-background-service-and-its-servicejson): a 2.x TUI attaches to it instead of serving
// itself. `run` then makes sure one daemon watches that service, started
// once and outliving the TUI, and gets out of the way.
//
// The service writes its service.json when it starts and removes it at a
// clean exit, so a daemon started at login normally finds none: it
// follows the file, whenever it appears, and after the service goes away,
// whenever it comes back.

// followRetry spaces the event stream's attempts of a server found
// through a service file (the default caps at 30 s): while no service
// runs, an attempt is one ReadDir of the state directory (and, with the
// 1.x fallback, one refused loopback connection), so one every few
// seconds costs nothing, and a service that starts later is followed
// within about 5 s.
var followRetry = backoff.Policy{Initial: 500 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}

// servicePoll is how often a daemon that watches the 1.x fallback looks
// for an OpenCode 2 service that started since: one ReadDir of the state
// directory, and a request only to a service file that is new or was
// rewritten (serviceFollower.find). While nothing answers at all, the
// event stream's own attempts look (followRetry), and while a service is
// followed, nothing polls: its stream ending is the news.
//
// Polling, not inotify or kqueue: measured on Linux (BENCHMARKS.md), one
// look at a state directory of three files is a ReadDir of about 10 µs,
// 12 a minute; an inotify watch (golang.org/x/sys/unix) would need a
// kqueue twin for macOS, a watch of each missing parent (the state
// directory need not exist at login) and a fallback for file systems
// without events, to save 5 s on a service that itself takes seconds to
// start (the v2 preview: 9 s from `serve --service` to its file, on this
// machine), and whose first request within half a second of its port
// opening may hang anyway (docs/opencode.md#the-first-half-second-after-the-port-opens).
var servicePoll = 5 * time.Second

// serviceYoung is how long after a service file was written a service
// that did not answer (still starting) is asked again at every look,
// even when the pid it registers is not one this daemon can see (a
// service in another pid namespace, sharing the state directory).
const serviceYoung = 2 * time.Minute

// followPatience is how long the service followed may go without an
// answer (timeouts, resets, 5xx, "not yet") before the daemon looks for
// another: a busy or restarting-in-place service proves nothing by one
// failure, and moving is not free (the other service boots every
// --directory and starts its MCP servers). Evidence moves it at once: a
// refused connection, its file gone or stale, or its pid gone (holds).
const followPatience = time.Minute

// serviceURL is where the shared service usually listens (macOS and
// Linux), shown until its service file says otherwise.
const serviceURL = "http://127.0.0.1:49374"

// ServiceServer is the OpenCode 2 background service registered in file,
// as one server to watch: its URL and password are read from the file,
// and verified against the server (pid, version), at start and again
// whenever the server cannot be reached, so a service that starts after
// the daemon, restarts on another port or with another password, or goes
// away and comes back is followed. The password stays in memory.
//
// With channels, the other release channels' service-<channel>.json
// beside file are looked at too (OpenCode 2 names the file by its
// channel: service.json for latest, service-local.json, and
// service-<hash of the channel>.json for any other). Of several, the one
// followed is file (service.json) when its service answers, else the most
// recently written file whose service answers: the service started last
// (file's service, while it times out or answers "not yet", is waited
// for as the one followed would be: holds).
// The daemon says which in its log, in status and in doctor, with the
// others that answer; it stays with the file it follows until its
// service goes away (holds: a timeout or a "not yet" is not that), and
// follows the file to the service that rewrites it (one watch
// --service-file FILE per channel follows several).
//
// With fallback, while no service answers, the server watched is
// fallback if OpenCode answers there (1.x at its default address, for a
// daemon told nothing else): one engine for whichever OpenCode the user
// runs by default. While it watches the fallback, it looks for a service
// every servicePoll, and follows one as soon as it answers, as it would
// have at start.
func ServiceServer(file string, channels bool, fallback *Target) Target {
	f := &serviceFollower{file: file, channels: channels, fallback: fallback,
		alive: registry.Running, listener: ListenerOfOtherUser, log: slog.New(slog.DiscardHandler), failed: map[string]opencode.Registration{}}
	sc := Target{ServiceFile: file, URL: serviceURL, follow: f, Discover: f.discover}
	if fallback != nil {
		sc.URL, sc.Username = fallback.URL, fallback.Username
	}
	regs, _ := opencode.Registrations(file, channels)
	for _, r := range regs {
		if svc, err := opencode.ReadServiceFile(r.Path); err == nil {
			sc.URL = svc.URL
			break
		}
	}
	return sc
}

// serviceFollower finds the OpenCode 2 service among the service files
// of one state directory, remembers which one the daemon follows (for
// the log and status), and, while the daemon watches the 1.x fallback,
// looks for a service that started since.
type serviceFollower struct {
	file     string
	channels bool
	fallback *Target
	opts     opencode.Options // transport; the credentials come from each file
	alive    func(pid int) bool
	// listener says why the service's password must not go to url (what
	// listens there is another user's), or nil.
	listener func(url string) error
	// log is the daemon's logger, set before anything runs.
	log *slog.Logger

	mu  sync.Mutex
	cur followed
	// quiet is when the file asked first (the one followed, else the one
	// preferred) began failing to answer, in the run of failures going
	// on (zero while it answers): see followPatience.
	quiet time.Time
	// failed holds the files whose service did not answer, as they were
	// then: one that has not changed since, whose pid is gone and that
	// is no longer young, registers a service that is not coming back,
	// and is not asked again (a stale file after a kill -9, or a
	// service whose port another program now holds).
	failed map[string]opencode.Registration
	// restream, set by the daemon, ends the event stream's subscription
	// so that the next one detects the server again.
	restream func()
}

// followed is what the daemon follows: a service (its file), the
// fallback, or nothing.
type followed struct {
	svc      opencode.Service // Path "" when none
	fallback bool
	// others are further files whose service answered when this one
	// was chosen.
	others []string
	// alive: the service's pid was alive when it was chosen.
	alive bool
}

func (a followed) same(b followed) bool {
	return a.fallback == b.fallback && a.svc.Path == b.svc.Path && a.svc.Same(b.svc)
}

// discover is the server's Discover: the service, else the fallback.
func (f *serviceFollower) discover(ctx context.Context) (string, string, error) {
	svc, others, err := f.find(ctx)
	if errors.Is(err, errHeld) {
		return svc.URL, svc.Password(), err // still the one followed
	}
	if err == nil {
		f.set(followed{svc: svc, others: others, alive: f.alive(svc.PID)})
		return svc.URL, svc.Password(), nil
	}
	if f.fallback == nil || errors.Is(err, opencode.ErrUnauthorized) {
		f.set(followed{})
		return svc.URL, svc.Password(), err
	}
	// No service runs: the fallback, if OpenCode answers there. One
	// that refuses the credentials is not the user's default OpenCode
	// (they gave none), and must not end the daemon: it keeps looking
	// for the service.
	fb := f.fallback
	o := f.opts
	o.Username, o.Password = fb.Username, fb.Password
	_, _, _, ferr := opencode.Detect(ctx, fb.URL, o)
	if ferr == nil {
		f.set(followed{fallback: true})
		return fb.URL, fb.Password, nil
	}
	f.set(followed{})
	if errors.Is(ferr, opencode.ErrUnauthorized) {
		return "", "", fmt.Errorf("%w: %v; and OpenCode at %s refused the credentials (give its password to watch it)", opencode.ErrUnavailable, err, fb.URL)
	}
	return "", "", fmt.Errorf("%w: %v; and no OpenCode answers at %s", opencode.ErrUnavailable, err, fb.URL)
}

// errHeld marks find's error when the look proves nothing: the service
// followed (else the one preferred) did not answer but is kept (holds),
// or the state directory could not be read. The daemon stays with what
// it follows, and tries again.
var errHeld = errors.New("staying with the OpenCode 2 service")

// find looks for the first service that answers among the state
// directory's service files (one ReadDir), preferring the one followed
// now, then file, then the newest, asking only the files worth asking
// (see failed). The first of them is kept while its failure proves
// nothing (holds), and the one followed while the directory cannot be
// read: then the error matches errHeld, and no other file is asked.
// Once one answers, the rest are asked too when that is news (another
// service than the one followed), so that the log and status can name
// every service that answers. A refused password is the error only when
// no file's service answers (a stale file's port may be another
// OpenCode's); with no file at all the error matches fs.ErrNotExist.
func (f *serviceFollower) find(ctx context.Context) (opencode.Service, []string, error) {
	regs, err := opencode.Registrations(f.file, f.channels)
	if err != nil {
		// A look that failed (EMFILE, EIO) says nothing about the
		// service followed: it stays the one followed.
		err = fmt.Errorf("%w: looking for the OpenCode 2 service: %v", opencode.ErrUnavailable, err)
		if cur := f.following().svc; cur.Path != "" {
			return cur, nil, fmt.Errorf("%w: %w", errHeld, err)
		}
		return opencode.Service{}, nil, err
	}
	if len(regs) == 0 {
		return opencode.Service{}, nil, fmt.Errorf("no OpenCode 2 service is registered (%s: %w)", f.where(), fs.ErrNotExist)
	}
	// The service followed is asked first: while it answers, it stays
	// the one followed, whatever else started meanwhile (every
	// re-subscribe of its stream looks again; a hiccup must not move the
	// daemon to another channel's service). With none followed, the one
	// preferred is first. Either is kept through a failure that proves
	// nothing (holds): a "not yet" of service.json's service, starting
	// at login beside another channel's, does not choose that other one
	// for good.
	cur := f.following().svc.Path
	if i := slices.IndexFunc(regs, func(r opencode.Registration) bool { return r.Path == cur }); i > 0 {
		regs = slices.Concat(regs[i:i+1], regs[:i], regs[i+1:])
	}
	var first, refused error
	var found, refusedSvc opencode.Service
	var others []string
	for i, r := range regs {
		if found.Path != "" && f.following().same(followed{svc: found}) {
			break // no news
		}
		svc, err := f.ask(ctx, r)
		if i == 0 && f.holds(svc, err) {
			return svc, nil, fmt.Errorf("%w: %w", errHeld, err)
		}
		switch {
		case err == nil && found.Path == "":
			found = svc
		case err == nil:
			others = append(others, r.Path)
		case found.Path != "":
		case errors.Is(err, opencode.ErrUnauthorized):
			// That service runs and wants another password -- or its
			// file is stale and another OpenCode holds the port: the
			// next file may register the one that answers.
			if refused == nil {
				refused, refusedSvc = err, svc
			}
		case first == nil:
			first = err
		}
	}
	switch {
	case found.Path != "":
		return found, others, nil
	case refused != nil:
		return refusedSvc, nil, refused
	}
	return opencode.Service{}, nil, first
}

// ask reads one service file and verifies it against its server, unless
// it is a file that failed before and is not worth asking again (not the
// one followed: holds judges that one). The service the file names comes
// back with any error but the file's own.
func (f *serviceFollower) ask(ctx context.Context, r opencode.Registration) (opencode.Service, error) {
	svc, err := opencode.ReadServiceFile(r.Path)
	if err != nil {
		return svc, err
	}
	f.mu.Lock()
	prev, failed := f.failed[r.Path]
	failed = failed && r.Path != f.cur.svc.Path
	f.mu.Unlock()
	if failed && prev.Same(r) && time.Since(r.ModTime) > serviceYoung && !f.alive(svc.PID) {
		return svc, fmt.Errorf("%w: %s registers pid %d, which is gone", opencode.ErrStaleService, r.Path, svc.PID)
	}
	if err := f.listener(svc.URL); err != nil {
		// The file is stale (its service is gone) and another user
		// holds the port: the password, which the next service reuses,
		// is not handed to them.
		return svc, fmt.Errorf("%w: %s: %w", opencode.ErrStaleService, r.Path, err)
	}
	_, err = svc.Verify(ctx, f.opts)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil && !errors.Is(err, opencode.ErrUnauthorized) {
		f.failed[r.Path] = r
		return svc, err
	}
	delete(f.failed, r.Path)
	return svc, err // a refusal names its file: find may report it
}

// holds decides for the file asked first (the one followed, else the one
// preferred), which names svc (for the file followed, the service
// followed or the one that rewrote the file since: the channel's service
// restarted) and answered err: whether the daemon stays with it, or
// waits for it. It does while the failure proves nothing (a timeout, a
// reset, a 5xx, a "not yet": opencode.ErrUnavailable but not
// ErrRefused) and the file has not gone unanswered for followPatience.
// Evidence lets the daemon look elsewhere at once: a refused
// connection; the file gone, unreadable or stale (another process
// answers at its URL); a refused password; the pid gone (when the
// daemon saw the service's pid alive: a service in another pid
// namespace has a pid it cannot see). An answer ends the run of
// failures.
func (f *serviceFollower) holds(svc opencode.Service, err error) bool {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	transient := errors.Is(err, opencode.ErrUnavailable) && !errors.Is(err, opencode.ErrRefused)
	if err == nil || !transient || f.cur.alive && !f.alive(svc.PID) {
		f.quiet = time.Time{}
		return false
	}
	if f.quiet.IsZero() {
		f.quiet = now
	}
	if now.Sub(f.quiet) < followPatience {
		return true
	}
	f.log.Info("the OpenCode 2 service has not answered for a minute; looking for another", "file", svc.Path, "url", svc.URL, "err", err)
	return false
}

// where names the files looked at, for an error.
func (f *serviceFollower) where() string {
	if f.channels {
		return f.file + " or service-<channel>.json beside it"
	}
	return f.file
}

// set records what the daemon follows now, and says so when that is
// news: which service file (with the others that answer), the fallback,
// or none any more.
func (f *serviceFollower) set(now followed) {
	f.mu.Lock()
	prev := f.cur
	if now.same(prev) && now.others == nil {
		now.others = prev.others // found without asking the rest again
	}
	f.cur = now
	if !now.same(prev) {
		f.quiet = time.Time{} // a run of failures is the one followed's
	}
	f.mu.Unlock()
	if now.same(prev) {
		return
	}
	switch {
	case now.svc.Path != "" && len(now.others) > 0:
		f.log.Info("following the OpenCode 2 service", "file", now.svc.Path, "url", now.svc.URL, "pid", now.svc.PID, "version", now.svc.Version,
			"also_registered", now.others, "hint", "one daemon follows one service: to watch another too, run mcp-reconnect watch --service-file FILE")
	case now.svc.Path != "":
		f.log.Info("following the OpenCode 2 service", "file", now.svc.Path, "url", now.svc.URL, "pid", now.svc.PID, "version", now.svc.Version)
	case now.fallback:
		f.log.Info("no OpenCode 2 service answers; watching OpenCode at the fallback address", "url", f.fallback.URL,
			"service_files", f.where(), "looking_every", servicePoll)
	case prev.svc.Path != "" || prev.fallback:
		f.log.Info("no OpenCode 2 service answers; looking for one every few seconds", "service_files", f.where())
	}
}

// following is the service followed now (Path "" when none).
func (f *serviceFollower) following() followed {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// watch looks for a service every servicePoll while the daemon watches
// the fallback, and has the server detected again (ending the fallback's
// event stream) once one answers. It returns when ctx ends.
func (f *serviceFollower) watch(ctx context.Context) {
	t := time.NewTicker(servicePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !f.following().fallback {
			continue
		}
		if _, _, err := f.find(ctx); err != nil {
			continue
		}
		f.mu.Lock()
		restream := f.restream
		f.mu.Unlock()
		if restream != nil {
			restream()
		}
	}
}

// setRestream sets how the daemon ends the event stream's subscription.
func (f *serviceFollower) setRestream(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restream = fn
}

// ListenerOfOtherUser says so when what listens at url's loopback port
// is provably a process of another user of this machine: a service
// file's password is not sent there (the follower, and doctor, ask). It
// cannot tell elsewhere (another host, no /proc): nil.
func ListenerOfOtherUser(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || !loopback.Host(u.Hostname()) {
		return nil
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil
	}
	if _, err := procview.ListenerPID(port, os.Getuid()); errors.Is(err, procview.ErrNotMine) {
		return fmt.Errorf("what listens at %s is another user's process; the service's password is not sent there", u.Host)
	}
	return nil
}

// ServiceDaemon is the running daemon that follows the OpenCode 2 service
// file file (by any spelling), or watches the URL the file names (a
// daemon started for it would refuse to run beside that one: see
// duplicate.go), and the request that names the service among that
// daemon's servers: the file as that daemon spells it, or the URL.
func ServiceDaemon(reg *registry.Registry, file string) (registry.Entry, statusapi.ReconnectRequest, bool, error) {
	entries, err := reg.List()
	if err != nil {
		return registry.Entry{}, statusapi.ReconnectRequest{}, false, err
	}
	var urls []string
	if svc, err := opencode.ReadServiceFile(file); err == nil {
		urls = append(urls, svc.URL)
	}
	var dup *DuplicateError
	if !errors.As(findDuplicate(entries, 0, urls, file), &dup) {
		return registry.Entry{}, statusapi.ReconnectRequest{}, false, nil
	}
	e := dup.Running
	if e.Service != "" && sameFile(file, e.Service) {
		return e, statusapi.ReconnectRequest{Service: e.Service}, true, nil
	}
	return e, statusapi.ReconnectRequest{URL: dup.URL}, true, nil
}

// EnsureServiceWatch starts a daemon for the OpenCode 2 service file file
// unless one runs already, and waits (up to wait) until it has registered.
// Callers on one machine take turns (registry.StartLock), so two TUIs
// started at once start one daemon. It reports whether it started
// one.
func EnsureServiceWatch(ctx context.Context, reg *registry.Registry, file string, start func() error, wait time.Duration) (bool, error) {
	unlock, err := reg.Lock(registry.StartLock)
	if err != nil {
		return false, err
	}
	defer unlock()
	if _, _, ok, err := ServiceDaemon(reg, file); err != nil || ok {
		return false, err
	}
	if err := start(); err != nil {
		return false, fmt.Errorf("starting a daemon for the OpenCode 2 service: %w", err)
	}
	deadline := time.After(wait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, _, ok, _ := ServiceDaemon(reg, file); ok {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-deadline:
			return true, errors.New("the daemon started for the OpenCode 2 service did not register in time; see its log")
		case <-tick.C:
		}
	}
}

// ChooseService makes ServiceServer's choice once (doctor): of the
// service files in file's directory (with channels, every channel's), the
// one whose service answers, preferring file, then the newest; and the
// other files whose service answers too. When none answers, the error is
// the first file's (matching opencode.ErrUnauthorized when a service
// refused its file's password, with that file's Service), or matches
// fs.ErrNotExist when no file exists.
func ChooseService(ctx context.Context, file string, channels bool) (opencode.Service, []string, error) {
	return ServiceServer(file, channels, nil).follow.find(ctx)
}
