package reconnect

import "sync"

// Budget bounds the connect calls in flight across every directory. Local
// connects spawn a process each, so the bound is real work saved. A remote
// connect to a URL that accepts TCP and never answers holds its slot for up
// to a minute, so remote connects may hold at most all slots but one: a
// silent remote server can delay other remote servers, never a local one.
type Budget struct {
	mu          sync.Mutex
	max         int
	remoteMax   int
	inUse       int
	remoteInUse int
}

// NewBudget returns a budget of n slots (at least 1).
func NewBudget(n int) *Budget {
	n = max(n, 1)
	return &Budget{max: n, remoteMax: max(n-1, 1)}
}

// TryAcquire takes a slot if one is free for a connect of this kind.
func (b *Budget) TryAcquire(remote bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inUse >= b.max || remote && b.remoteInUse >= b.remoteMax {
		return false
	}
	b.inUse++
	if remote {
		b.remoteInUse++
	}
	return true
}

// Release returns a slot taken by TryAcquire with the same kind.
func (b *Budget) Release(remote bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inUse--
	if remote {
		b.remoteInUse--
	}
}

// InUse is the number of slots taken.
func (b *Budget) InUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}
