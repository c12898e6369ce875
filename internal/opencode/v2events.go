package opencode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// ParseEventV2 decodes one data field of 2.x /api/event:
// {"id":…,"created":…,"type":T,"location"?:{"directory":D},"data":{…}}.
// Heartbeats are SSE comments and never reach it. The data of an event is
// decoded only for mcp.status.changed, which names its server.
func ParseEventV2(data []byte) (Event, error) {
	var raw struct {
		Type     json.RawMessage `json:"type"`
		Location json.RawMessage `json:"location"`
		Data     json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Event{}, fmt.Errorf("event is not a JSON object: %w", err)
	}
	var ev Event
	if json.Unmarshal(raw.Type, &ev.Type) != nil || ev.Type == "" {
		return Event{}, errors.New("event has no string \"type\"")
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
	default:
		ev.Kind = KindOther
	}
	return ev, nil
}
