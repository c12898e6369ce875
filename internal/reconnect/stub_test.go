package reconnect

import (
	"context"
	"sync"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// ocStub is a minimal OpenCode for engine tests that need exact control:
// statuses,
// config and connect behaviour set per directory and server, every call
// recorded with its (fake) time.
type ocStub struct {
	mu       sync.Mutex
	status   map[string]map[string]opencode.ServerStatus
	config   map[string]opencode.MCPEntry
	delay    map[string]time.Duration // connect duration by server name
	after    map[string]string        // status a connect leaves, by server name
	readErr  error
	calls    []stubCall
	inFlight int
}

type stubCall struct {
	at        time.Time
	op        string // "status", "connect", "config"
	dir, name string
}

func newStub() *ocStub {
	return &ocStub{status: map[string]map[string]opencode.ServerStatus{}, config: map[string]opencode.MCPEntry{},
		delay: map[string]time.Duration{}, after: map[string]string{}}
}

func (o *ocStub) set(dir, name, status string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.status[dir] == nil {
		o.status[dir] = map[string]opencode.ServerStatus{}
	}
	o.status[dir][name] = opencode.ServerStatus{Status: status}
}

func (o *ocStub) MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, stubCall{time.Now(), "status", dir, ""})
	if o.readErr != nil {
		return nil, o.readErr
	}
	out := map[string]opencode.ServerStatus{}
	for k, v := range o.status[dir] {
		out[k] = v
	}
	return out, nil
}

func (o *ocStub) Connect(ctx context.Context, dir, name string) error {
	o.mu.Lock()
	o.calls = append(o.calls, stubCall{time.Now(), "connect", dir, name})
	d := o.delay[name]
	o.inFlight++
	o.mu.Unlock()
	defer func() { o.mu.Lock(); o.inFlight--; o.mu.Unlock() }()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if st, ok := o.after[name]; ok && o.status[dir] != nil {
		o.status[dir][name] = opencode.ServerStatus{Status: st}
	}
	return nil
}

func (o *ocStub) MCPConfig(ctx context.Context, dir string) (map[string]opencode.MCPEntry, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, stubCall{time.Now(), "config", dir, ""})
	out := map[string]opencode.MCPEntry{}
	for k, v := range o.config {
		out[k] = v
	}
	return out, nil
}

func (o *ocStub) connectTimes(dir, name string, since time.Time) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Duration
	for _, c := range o.calls {
		if c.op == "connect" && c.dir == dir && c.name == name {
			out = append(out, c.at.Sub(since))
		}
	}
	return out
}

func (o *ocStub) count(op, dir string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.calls {
		if c.op == op && (dir == "" || c.dir == dir) {
			n++
		}
	}
	return n
}

// runEngine starts e until the returned stop is called.
func runEngine(e *Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	return func() { cancel(); <-done }
}

// connectsSince is when each connect of name in dir came, from since on.
func connectsSince(oc *ocStub, dir, name string, since time.Time) []time.Duration {
	var out []time.Duration
	for _, c := range oc.connectTimes(dir, name, since) {
		if c >= 0 {
			out = append(out, c)
		}
	}
	return out
}
