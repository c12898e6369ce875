package reconnect

import (
	"slices"
	"sync"
)

// Budget bounds the connect calls in flight across every directory (and
// every engine of one daemon). Local connects spawn a process each, so the
// bound is real work saved. Make one with NewBudget (the zero Budget has
// no slots).
//
// Several engines (one daemon watching several OpenCode servers) each take
// a Share. While n servers share the budget, one may hold at most all slots
// but n-1 (and at least one), so connects that hang on one server never
// starve another.
//
// Within a share, remote connects may hold every slot but one: a remote
// connect to a URL that accepts TCP and never answers holds its slot for up
// to a minute (OpenCode's own timeouts), so a silent remote server can
// delay its server's other remote servers, never a local one. The remote
// limit is the share's, not the daemon's: a silent remote URL on one
// OpenCode server never delays remote connects on another.
//
// A budget of a single slot could not keep one for local servers and
// still let a remote one connect; there the remote connect gets a slot of
// its own beside the local one: with --max-concurrent 1 at most one local
// and one remote connect are in flight, and a silent remote URL never
// holds the only slot. A server's share of one slot because other servers
// share the budget is one connect at a time, of either kind: a server
// never holds more than its share.
//
// A slot is taken only by a connect about to be sent, and returned when
// it returns; nothing is promised to one who found none. Each release is
// told to every engine (Share.freed), which wakes the directories waiting for a
// slot one at a time while a slot fits them: a released slot costs about
// one status read per engine, and a thousand waiting directories do not
// poll. The engines that wait are served first come first served, each
// kind of slot apart (line): a slot another engine waits for, and could
// take, is not taken by an engine that came later (a server whose connect
// just returned would otherwise take the slot back at once, every time).
type Budget struct {
	mu     sync.Mutex
	max    int
	all    pool // every connect of the daemon
	shares map[*Share]*pool
	line   [2][]*Share // the shares waiting for a local [0] or remote [1] slot, in order
}

// pool counts the connects in flight of one kind of holder.
type pool struct{ local, remote int }

// Share is one engine's (one OpenCode server's) part of a Budget: its
// connects take and return their slots through it.
type Share struct {
	b     *Budget
	freed chan struct{} // a slot was released since it was last read
}

// Share adds a sharer: each engine of the daemon takes one.
func (b *Budget) Share() *Share {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &Share{b: b, freed: make(chan struct{}, 1)}
	b.shares[s] = &pool{}
	return s
}

// NewBudget returns a budget of n slots (at least 1).
func NewBudget(n int) *Budget {
	return &Budget{max: max(n, 1), shares: map[*Share]*pool{}}
}

// TryTake takes a slot for a connect of this kind if one is free; the
// connect must Release it when it returns.
func (s *Share) TryTake(remote bool) bool {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fits(s, remote) {
		return false
	}
	b.all.add(remote, 1)
	b.shares[s].add(remote, 1)
	return true
}

// Release returns a slot of this kind.
func (s *Share) Release(remote bool) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.all.add(remote, -1)
	b.shares[s].add(remote, -1)
	for sh := range b.shares {
		select {
		case sh.freed <- struct{}{}:
		default:
		}
	}
}

// Fits reports whether a connect of this kind would get a slot now.
func (s *Share) Fits(remote bool) bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.b.fits(s, remote)
}

// Waiting says which kinds of slot the share's directories wait for
// (slotLocal, slotRemote): it joins the end of that kind's line, or
// leaves it. An engine says so whenever its own line changes.
func (s *Share) Waiting(kinds uint8) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	left := false
	for i, kind := range [2]uint8{slotLocal, slotRemote} {
		in := slices.Contains(b.line[i], s)
		switch {
		case kinds&kind != 0 && !in:
			b.line[i] = append(b.line[i], s)
		case kinds&kind == 0 && in:
			b.line[i] = slices.DeleteFunc(b.line[i], func(w *Share) bool { return w == s })
			left = true
		}
	}
	if left { // the next engine in line may take a slot now: as a release
		for sh := range b.shares {
			select {
			case sh.freed <- struct{}{}:
			default:
			}
		}
	}
}

// fits reports whether s may take a slot: one is free for it, and no
// share ahead of it in the line could take one. Caller holds b.mu.
func (b *Budget) fits(s *Share, remote bool) bool {
	if !b.free(s, remote) {
		return false
	}
	i := 0
	if remote {
		i = 1
	}
	for _, w := range b.line[i] {
		if w == s {
			break
		}
		if b.free(w, remote) {
			return false
		}
	}
	return true
}

// fits reports whether a pool of n slots holding p may start one more
// connect of this kind: remote connects hold at most n-1 slots (at least
// one); pair lets a pool of one slot run one connect of each kind.
func (p pool) fits(n int, remote, pair bool) bool {
	if n == 1 && pair {
		if remote {
			return p.remote == 0
		}
		return p.local == 0
	}
	if remote && p.remote >= max(n-1, 1) {
		return false
	}
	return p.local+p.remote < n
}

// free reports whether a connect of this kind may start for share s. The
// daemon's pool counts every connect against max; the remote limit is the
// share's.
//
// Only --max-concurrent 1 itself runs a local and a remote connect side by
// side: a server's share of one slot, because other servers share the
// budget, is one connect at a time, or one server could take every slot
// of the daemon.
func (b *Budget) free(s *Share, remote bool) bool {
	pair := b.max == 1
	// The daemon's bound: max in all (with 1: one connect of each kind);
	// the remote limit is each share's.
	if pair && !b.all.fits(1, remote, true) || !pair && b.all.local+b.all.remote >= b.max {
		return false
	}
	return b.shares[s].fits(max(1, b.max-(len(b.shares)-1)), remote, pair)
}

func (p *pool) add(remote bool, n int) {
	if remote {
		p.remote += n
	} else {
		p.local += n
	}
}
