package fake2

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

// The event stream: GET /api/event's subscribers, the {id, created, type,
// location, data} envelope, heartbeat comments, and the end of a
// subscriber that falls too far behind.

// sub is one subscriber of GET /api/event.
type sub struct {
	ch   chan []byte
	dead chan struct{} // closed when the subscriber fell queue frames behind
}

// SetHeartbeat sets the period of ": heartbeat" comments (0: none).
func (s *Server) SetHeartbeat(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heartbeat = d
}

// Subscribers is the number of open /api/event streams.
func (s *Server) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Publish sends an event on /api/event: {id, created, type, location (when
// dir is set), data}.
func (s *Server) Publish(dir, typ string, data map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(dir, typ, data)
}

// PublishRaw sends a raw data field (for garbage tests).
func (s *Server) PublishRaw(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendLocked(data)
}

func (s *Server) emitLocked(dir, typ string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	s.seq++
	if s.profile.ExecutionWithoutLocation && strings.HasPrefix(typ, "session.execution.") {
		dir = ""
	}
	type location struct {
		Directory string `json:"directory"`
	}
	// 2.x's envelope, in its order.
	msg := struct {
		ID       string         `json:"id"`
		Created  int64          `json:"created"`
		Type     string         `json:"type"`
		Location *location      `json:"location,omitempty"`
		Data     map[string]any `json:"data"`
	}{ID: fmt.Sprintf("evt_%04d", s.seq), Created: time.Now().UnixMilli(), Type: typ, Data: data}
	if dir != "" {
		msg.Location = &location{dir}
	}
	b, _ := json.Marshal(msg)
	s.sendLocked(b)
}

func (s *Server) sendLocked(b []byte) {
	for sb := range s.subs {
		select {
		case sb.ch <- b:
		default:
			// 2.x ends the response of a subscriber that fell too far
			// behind, rather than dropping single events.
			close(sb.dead)
			delete(s.subs, sb)
		}
	}
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	s.record(r, RouteEvent, "", "")
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no flusher", http.StatusInternalServerError)
		return
	}
	sb := &sub{ch: make(chan []byte, queue), dead: make(chan struct{})}
	s.mu.Lock()
	s.subs[sb] = struct{}{}
	hb := s.heartbeat
	s.seq++
	first := fmt.Sprintf(`{"id":"evt_%04d","type":"server.connected","data":{}}`, s.seq)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, sb)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = sse.Write(w, "", []byte(first))
	// Both builds measured send a heartbeat comment right after it.
	_, _ = w.Write([]byte(": heartbeat\n\n"))
	fl.Flush()
	var tick <-chan time.Time
	if hb > 0 {
		t := time.NewTicker(hb)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sb.dead:
			return
		case b := <-sb.ch:
			if sse.Write(w, "", b) != nil {
				return
			}
			fl.Flush()
		case <-tick:
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// queue is how many frames a subscriber may lag before 2.x ends its
// stream.
const queue = 4096
