package probe

import (
	"context"
	"sync"
)

// Hub shares endpoint watches: however many directories use one remote
// server, its endpoint is watched over one held connection, and a restart
// is told to every one of them.
type Hub struct {
	p       *Prober
	mu      sync.Mutex
	watches map[string]*shared
	closed  bool // Close was called: Watch starts nothing more
	wg      sync.WaitGroup
}

type shared struct {
	subs   map[chan struct{}]struct{}
	cancel context.CancelFunc
	run    int // the watch goroutine that serves it now (Renew starts another)
}

// NewHub returns a hub watching with p. Close stops it.
func NewHub(p *Prober) *Hub { return &Hub{p: p, watches: map[string]*shared{}} }

// Watch subscribes to a restart of rawURL's endpoint (see Prober.Watch):
// the channel is closed when one is seen. stop unsubscribes; the watch
// itself ends with its last subscriber, or when it reported a restart.
// After Close, Watch starts nothing: the channel is never closed.
func (h *Hub) Watch(rawURL string) (restarted <-chan struct{}, stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return make(chan struct{}), func() {}
	}
	sh := h.watches[rawURL]
	if sh == nil {
		sh = &shared{subs: map[chan struct{}]struct{}{}}
		h.watches[rawURL] = sh
		h.start(rawURL, sh)
	}
	ch := make(chan struct{})
	sh.subs[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := sh.subs[ch]; !ok {
			return
		}
		delete(sh.subs, ch)
		if len(sh.subs) == 0 {
			sh.cancel()
			if h.watches[rawURL] == sh {
				delete(h.watches, rawURL)
			}
		}
	}
}

// start runs a watch goroutine for sh, which its cancel ends. Caller holds
// h.mu.
func (h *Hub) start(rawURL string, sh *shared) {
	ctx, cancel := context.WithCancel(context.Background())
	sh.cancel = cancel
	sh.run++
	run := sh.run
	h.wg.Go(func() { h.run(ctx, rawURL, sh, run) })
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
		h.start(rawURL, sh)
	}
}

func (h *Hub) run(ctx context.Context, rawURL string, sh *shared, run int) {
	restarted := h.p.Watch(ctx, rawURL, nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	if sh.run != run {
		return // renewed: another goroutine serves its subscribers
	}
	if h.watches[rawURL] == sh {
		delete(h.watches, rawURL)
	}
	for ch := range sh.subs {
		if restarted {
			close(ch)
		}
		delete(sh.subs, ch)
	}
	sh.cancel()
}

// Close stops every watch and waits for them.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for _, sh := range h.watches {
		sh.cancel()
	}
	h.mu.Unlock()
	h.wg.Wait()
}
