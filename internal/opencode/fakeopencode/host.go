package fakeopencode

import (
	"context"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
)

// Hosts serves handlers on in-memory listeners by host:port, and can stop
// and replace one: an OpenCode restarting, on the same port or another, as
// the same generation or the other. Dialing a host that serves nothing is
// refused, as a closed loopback port is. Safe inside a synctest bubble;
// call Close before it ends.
type Hosts struct {
	mu      sync.Mutex
	servers map[string]*hostServer
}

type hostServer struct {
	l    *PipeListener
	hs   *http.Server
	done chan struct{}
}

// NewHosts returns hosts serving nothing yet.
func NewHosts() *Hosts { return &Hosts{servers: map[string]*hostServer{}} }

// Serve starts handler at host (the host:port of a URL), replacing what
// served there.
func (h *Hosts) Serve(host string, handler http.Handler) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopLocked(host)
	s := &hostServer{l: NewPipeListener(), hs: &http.Server{Handler: handler}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.hs.Serve(s.l)
	}()
	h.servers[host] = s
}

// Stop ends what serves host, dropping its connections.
func (h *Hosts) Stop(host string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopLocked(host)
}

// Close stops every host.
func (h *Hosts) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.servers {
		h.stopLocked(name)
	}
}

func (h *Hosts) stopLocked(host string) {
	if s := h.servers[host]; s != nil {
		_ = s.hs.Close()
		<-s.done
		delete(h.servers, host)
	}
}

// Dial connects to the handler serving addr, or is refused.
func (h *Hosts) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	h.mu.Lock()
	s := h.servers[addr]
	h.mu.Unlock()
	if s == nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return s.l.Dial(ctx, network, addr)
}

// Transport reaches every host (a new connection per request, so a
// stopped host is refused at once).
func (h *Hosts) Transport() *http.Transport {
	return &http.Transport{DialContext: h.Dial, DisableKeepAlives: true}
}
