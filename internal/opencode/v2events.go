package opencode

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// 2.x event types the daemon acts on.
const (
	// EventStatusChangedV2 fires on every MCP status transition of a
	// location (start → pending, outcome, disconnect, live close, removal):
	// a boot is a burst of them.
	EventStatusChangedV2 = "mcp.status.changed"
	// EventLocationShutdownV2: the location's services, MCP servers
	// included, stopped (evicted after an hour without session activity,
	// or reloaded).
	EventLocationShutdownV2 = "location.shutdown"
)

// parseEventV2 decodes one data field of 2.x /api/event:
// {"id":…,"created":…,"type":T,"location"?:{"directory":D},"data":{…}},
// and returns the session a session.* event is about (data.sessionID), or
// "". Heartbeats are SSE comments and never reach it. The data of an event
// is decoded only for mcp.status.changed, which names its server, and
// session.* events, which name their session. It knows no session: an
// event without a location has no directory (sessionDirs.parse fills it
// in from the session's earlier events).
func parseEventV2(data []byte) (Event, string, error) {
	var raw struct {
		Type     json.RawMessage `json:"type"`
		Location json.RawMessage `json:"location"`
		Data     json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Event{}, "", fmt.Errorf("event is not a JSON object: %w", err)
	}
	var ev Event
	if json.Unmarshal(raw.Type, &ev.Type) != nil || ev.Type == "" {
		return Event{}, "", errors.New("event has no string \"type\"")
	}
	if len(raw.Location) > 0 {
		// A location of another shape is ignored, not fatal.
		var loc struct {
			Directory json.RawMessage `json:"directory"`
		}
		if json.Unmarshal(raw.Location, &loc) == nil {
			_ = json.Unmarshal(loc.Directory, &ev.Directory)
		}
	}
	session := ""
	switch {
	case ev.Type == EventStatusChangedV2:
		// A wake-up, not a crash report: the transition may be a start,
		// a success or a deliberate disconnect.
		ev.Kind = KindServerChanged
		var d struct {
			Server json.RawMessage `json:"server"`
		}
		if json.Unmarshal(raw.Data, &d) == nil {
			_ = json.Unmarshal(d.Server, &ev.Server)
		}
	case ev.Type == EventLocationShutdownV2:
		// A shutdown that names no location says nothing the engine can
		// act on; it must not read as "every instance gone".
		if ev.Directory != "" {
			ev.Kind = KindInstanceGone
		}
	case strings.HasPrefix(ev.Type, "session."):
		ev.Kind = KindActivity
		var d struct {
			SessionID json.RawMessage `json:"sessionID"`
		}
		if json.Unmarshal(raw.Data, &d) == nil {
			_ = json.Unmarshal(d.SessionID, &session)
		}
	default:
		ev.Kind = KindOther
	}
	return ev, session, nil
}

// EventSessionDeletedV2 ends a session: its directory is forgotten.
const EventSessionDeletedV2 = "session.deleted"

// maxSessions bounds how many sessions' directories a process's memory keeps,
// and maxSessionID and maxSessionDir the size of each (so the memory is
// bounded in bytes too: at most about 50 MiB).
const (
	maxSessions   = 10000
	maxSessionID  = 256
	maxSessionDir = 4096
)

// sessionDirs remembers the directory of each session seen on the event
// stream. OpenCode 2.1.2 sends session.created, session.inbox.* and
// session.step.* with a location, but session.execution.* and
// session.usage.updated without one (measured: e2e
// TestSessionEventsOfATurnNameTheirDirectory): only the session tells
// whose activity it is. The least recently seen session is forgotten
// first when maxSessions are known, and a deleted one at once.
type sessionDirs struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *sessionDir, most recent first
	byID  map[string]*list.Element
}

type sessionDir struct{ id, dir string }

func newSessionDirs(n int) *sessionDirs {
	return &sessionDirs{max: n, order: list.New(), byID: map[string]*list.Element{}}
}

// parse is parseEventV2 with the session memory: an event with a location
// and a session teaches the session's directory, and a session event
// without a location gets the directory its session was last seen in.
func (s *sessionDirs) parse(data []byte) (Event, error) {
	ev, id, err := parseEventV2(data)
	if err != nil || id == "" {
		return ev, err
	}
	if len(id) > maxSessionID || len(ev.Directory) > maxSessionDir {
		// OpenCode's ids are a few dozen bytes and a path at most a few
		// KiB: anything longer is not remembered (10,000 sessions of a
		// megabyte each would hold 10 GB).
		return ev, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	el := s.byID[id]
	switch {
	case ev.Type == EventSessionDeletedV2:
		if el != nil {
			s.order.Remove(el)
			delete(s.byID, id)
		}
		if ev.Directory == "" && el != nil {
			ev.Directory = el.Value.(*sessionDir).dir
		}
	case ev.Directory != "":
		if el != nil {
			el.Value.(*sessionDir).dir = ev.Directory
			s.order.MoveToFront(el)
			break
		}
		s.byID[id] = s.order.PushFront(&sessionDir{id: id, dir: ev.Directory})
		for s.order.Len() > s.max {
			old := s.order.Back()
			s.order.Remove(old)
			delete(s.byID, old.Value.(*sessionDir).id)
		}
	case el != nil:
		ev.Directory = el.Value.(*sessionDir).dir
		s.order.MoveToFront(el)
	}
	return ev, nil
}

// forget forgets every session.
func (s *sessionDirs) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order.Init()
	clear(s.byID)
}

// ParseEventV2Head reads what it can of the start of a 2.x event too large
// to keep (the stream hands over its head): OpenCode puts the type and the
// location before the data, so an activity event still tells where a
// client is busy. Only a session event with a location is returned (the
// head of anything else says nothing the engine may act on); a head that
// does not reach the location is an error.
func ParseEventV2Head(head []byte) (Event, error) {
	s := jscan{b: head}
	if !s.open() {
		return Event{}, errors.New("event is not a JSON object")
	}
	var ev Event
	for first := true; ev.Type == "" || ev.Directory == ""; {
		key, ok := s.member(&first)
		if !ok || s.bad {
			break
		}
		switch string(key) {
		case "type":
			ev.Type, _ = jsonString(s.skip())
		case "location":
			raw := s.skip()
			if s.bad {
				break
			}
			var loc struct {
				Directory string `json:"directory"`
			}
			if json.Unmarshal(raw, &loc) == nil {
				ev.Directory = loc.Directory
			}
		case "data":
			return Event{}, errors.New("event head: data before type and location")
		default:
			s.skip()
		}
	}
	if !strings.HasPrefix(ev.Type, "session.") || ev.Directory == "" {
		return Event{}, errors.New("event head holds no session event with a location")
	}
	ev.Kind = KindActivity
	return ev, nil
}
