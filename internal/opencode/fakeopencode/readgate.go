package fakeopencode

import (
	"net/http"
	"sync"
	"time"
)

// ReadGate holds the test knobs of a fake's MCP status route, the same for
// both generations' fakes: a delay, an answer that replaces the model's,
// and the most reads of one directory in flight at once. Its zero value is
// ready; embed it.
type ReadGate struct {
	mu       sync.Mutex
	override func(dir string) (code int, body string, hang bool)
	delay    time.Duration
	reading  map[string]int
	most     int
}

// SetStatusOverride makes the status route answer with f instead of the
// model; nil restores the model. hang blocks until the request is
// cancelled.
func (g *ReadGate) SetStatusOverride(f func(dir string) (code int, body string, hang bool)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.override = f
}

// SetStatusDelay makes every status read take d.
func (g *ReadGate) SetStatusDelay(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.delay = d
}

// MaxConcurrentReads is the most status reads of one directory that were
// in flight at once.
func (g *ReadGate) MaxConcurrentReads() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// Enter counts a status read of dir until leave, waits the delay, and
// answers with the override when one is set. It reports whether the model
// must answer (false: answered, or the request went away).
func (g *ReadGate) Enter(w http.ResponseWriter, r *http.Request, dir string) (serve bool, leave func()) {
	g.mu.Lock()
	override, delay := g.override, g.delay
	if g.reading == nil {
		g.reading = map[string]int{}
	}
	g.reading[dir]++
	g.most = max(g.most, g.reading[dir])
	g.mu.Unlock()
	leave = func() {
		g.mu.Lock()
		g.reading[dir]--
		g.mu.Unlock()
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return false, leave
		}
	}
	if override != nil {
		code, body, hang := override(dir)
		if hang {
			<-r.Context().Done()
			return false, leave
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
		return false, leave
	}
	return true, leave
}
