package probe

import (
	"context"
	"sync"
	"time"
)

// Hub shares the work done for endpoints: however many directories use
// one remote server, its endpoint is probed by one goroutine (Reachable)
// and watched for restarts over one held connection (Watch), and what is
// seen is told to every subscriber. A subscriber is told from the hub's
// goroutine, never while the hub's lock is held, so it may take its own
// lock (and subscribe or stop under it); it may be told once more after
// it stopped.
type Hub struct {
	p      *Prober
	probed func() // counts each reachability dial; nil: none
	mu     sync.Mutex
	// watches and probes hold the endpoints with subscribers, by URL.
	watches map[string]*shared
	probes  map[string]*shared
	closed  bool // Close was called: nothing more starts
	wg      sync.WaitGroup
}

type shared struct {
	subs   map[*sub]struct{}
	joined chan struct{} // a subscriber joined probes already running
	// cancel ends the goroutine that serves it now (Renew starts
	// another): an ended one has nothing more to tell.
	cancel context.CancelFunc
}

type sub struct {
	told func(up bool)
	up   bool // the reachability last told
}

// NewHub returns a hub probing and watching with p; probed, when not nil,
// is called for each reachability probe dialled. Close stops it.
func NewHub(p *Prober, probed func()) *Hub {
	return &Hub{p: p, probed: probed, watches: map[string]*shared{}, probes: map[string]*shared{}}
}

// Watch subscribes to a restart of rawURL's endpoint (see Prober.Watch):
// restarted is called when one is seen, and the watch ends. stop
// unsubscribes; the watch itself ends with its last subscriber. After
// Close, Watch starts nothing.
func (h *Hub) Watch(rawURL string, restarted func()) (stop func()) {
	return h.subscribe(h.watches, rawURL, func(bool) { restarted() }, h.run)
}

// Reachable subscribes to the reachability of rawURL's endpoint, probed
// every Interval of its time down (within the prober's rate): told(true)
// at the first probe that gets through after the subscription, and
// told(up) each time it changes after that. stop unsubscribes; the probes
// end with the last subscriber.
func (h *Hub) Reachable(rawURL string, told func(up bool)) (stop func()) {
	return h.subscribe(h.probes, rawURL, told, h.reach)
}

func (h *Hub) subscribe(m map[string]*shared, rawURL string, told func(bool),
	loop func(context.Context, string, *shared)) (stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return func() {}
	}
	sh := m[rawURL]
	if sh == nil {
		sh = &shared{subs: map[*sub]struct{}{}, joined: make(chan struct{}, 1)}
		m[rawURL] = sh
		h.start(rawURL, sh, loop)
	} else {
		select {
		case sh.joined <- struct{}{}:
		default:
		}
	}
	s := &sub{told: told}
	sh.subs[s] = struct{}{}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := sh.subs[s]; !ok {
			return
		}
		delete(sh.subs, s)
		if len(sh.subs) == 0 {
			sh.cancel()
			if m[rawURL] == sh {
				delete(m, rawURL)
			}
		}
	}
}

// start runs a goroutine for sh, which its cancel ends. Caller holds
// h.mu.
func (h *Hub) start(rawURL string, sh *shared, loop func(context.Context, string, *shared)) {
	ctx, cancel := context.WithCancel(context.Background())
	sh.cancel = cancel
	h.wg.Go(func() { loop(ctx, rawURL, sh) })
}

// Renew dials every watch anew, keeping its subscribers: after the
// machine slept, a held connection may be dead without a word (the
// server restarted meanwhile, and its reset never arrived), and a watch
// over it would miss the server's next restart. A restart that happened
// during the sleep is not seen by the new dial (the server answers):
// that is for the caller to repair (a fresh session).
func (h *Hub) Renew() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	for rawURL, sh := range h.watches {
		sh.cancel()
		h.start(rawURL, sh, h.run)
	}
}

// run is a restart watch's goroutine.
func (h *Hub) run(ctx context.Context, rawURL string, sh *shared) {
	h.p.Watch(ctx, rawURL, nil) // true (restarted) unless ctx ended
	h.mu.Lock()
	if ctx.Err() != nil {
		// Renewed (another goroutine serves its subscribers), its last
		// subscriber gone, or the hub closed: nothing to tell.
		h.mu.Unlock()
		return
	}
	delete(h.watches, rawURL) // sh: its ctx ends when another takes its place
	told := sh.subs
	sh.subs = nil
	sh.cancel()
	h.mu.Unlock()
	for s := range told {
		s.told(true)
	}
}

// reach is an endpoint's probes' goroutine. While the endpoint stays
// down, or answers while its server stays failed, the probes ease off
// (Interval of the time since it went down, or since the last subscriber
// joined: a server that just failed is probed at the pace of a fresh
// failure, not at the eased-off pace of another's older one).
func (h *Hub) reach(ctx context.Context, rawURL string, sh *shared) {
	since, wasUp := time.Now(), false
	next := since.Add(Interval(0)) // the next probe
	timer := time.NewTimer(Interval(0))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sh.joined:
			// Sooner, never later: subscribers joining every second do not
			// hold the probe off.
			since = time.Now()
			if soon := since.Add(Interval(0)); soon.Before(next) {
				next = soon
				timer.Reset(Interval(0))
			}
			continue
		case <-timer.C:
		}
		if !h.p.limit.Allow() {
			next = time.Now().Add(Interval(0) / 4)
			timer.Reset(Interval(0) / 4)
			continue
		}
		if h.probed != nil {
			h.probed()
		}
		up := h.p.Probe(ctx, rawURL) == nil
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if wasUp && !up {
			since = now
		}
		wasUp = up
		next = now.Add(Interval(now.Sub(since)))
		timer.Reset(next.Sub(now))
		var told []*sub
		h.mu.Lock()
		for s := range sh.subs {
			if s.up != up {
				s.up = up
				told = append(told, s)
			}
		}
		h.mu.Unlock()
		for _, s := range told {
			s.told(up)
		}
	}
}

// Close stops every watch and probe and waits for them.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for _, m := range []map[string]*shared{h.watches, h.probes} {
		for _, sh := range m {
			sh.cancel()
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}
