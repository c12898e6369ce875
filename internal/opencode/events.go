package opencode

import (
	"errors"
	"strings"
)

// Event types the daemon acts on.
const (
	EventServerConnected  = "server.connected"
	EventToolsChanged     = "mcp.tools.changed"
	EventInstanceDisposed = "server.instance.disposed"
	EventGlobalDisposed   = "global.disposed"
)

// Kind is what an event means to the engine, whatever OpenCode generation
// sent it. Nothing above this package looks at OpenCode's own event names.
type Kind int

// The kinds of event the engine acts on.
const (
	// KindOther is anything the engine ignores (project.*, file.*, …):
	// such events name directories nobody may be using.
	KindOther Kind = iota
	// KindServerFailed: a live MCP connection of Server in Directory
	// closed (1.x mcp.tools.changed). A crash report: re-check soon.
	KindServerFailed
	// KindServerChanged: Server in Directory changed state, for better or
	// worse (2.x mcp.status.changed). A wake-up, not a crash report.
	KindServerChanged
	// KindInstanceGone: OpenCode disposed or evicted Directory's instance.
	KindInstanceGone
	// KindAllGone: OpenCode disposed every instance.
	KindAllGone
	// KindActivity: a client is using Directory (sessions, messages), so
	// its MCP servers run anyway.
	KindActivity
)

// Event is one message of the event stream, reduced to what the daemon uses.
type Event struct {
	// Kind is what the event means to the engine.
	Kind Kind
	// Type is OpenCode's own name for the event (for logs and status).
	Type string
	// Directory the event is about; "" for none.
	Directory string
	// Server is the MCP server named (KindServerFailed, KindServerChanged).
	Server string
}

// ParseEvent decodes one data field of 1.x /global/event:
// {"directory": D, "payload": {"type": T, "properties": {...}}}.
//
// Most events are a streaming reply's message.part.updated, many a second
// and each carrying the whole text so far; only their type and directory
// matter. So nothing is decoded but those two and, for the events that need
// it, a field of properties: the rest is passed over without being built,
// and once OpenCode's field order (directory, then payload's type before
// its properties) has given what is needed, the rest is not even read.
// Keys are matched exactly (not ignoring case as encoding/json does for
// struct fields) and the first of duplicate keys counts.
func ParseEvent(data []byte) (Event, error) {
	s := jscan{b: data}
	if !s.open() {
		return Event{}, errors.New("event is not a JSON object")
	}
	var (
		dirRaw, props []byte
		hasDir        bool
		typ           string
		done          bool
	)
	for first := true; !done; {
		key, ok := s.member(&first)
		if !ok {
			break
		}
		switch string(key) {
		case "directory":
			if v := s.skip(); !hasDir {
				dirRaw, hasDir = v, true
			}
		case "payload":
			if s.peek() != '{' || typ != "" {
				s.skip()
				continue
			}
			s.open()
			for pfirst := true; ; {
				pkey, ok := s.member(&pfirst)
				if !ok {
					break
				}
				switch string(pkey) {
				case "type":
					t, isStr := jsonString(s.skip())
					if !isStr && !s.bad {
						return Event{}, errors.New("event payload.type is not a string")
					}
					if typ == "" {
						typ = t
					}
				case "properties":
					if v := s.skip(); props == nil {
						props = v
					}
				default:
					s.skip()
				}
				if typ != "" && hasDir && (props != nil || !needsProperties(typ)) {
					done = true
					break
				}
			}
		default:
			s.skip()
		}
	}
	if s.bad {
		return Event{}, errors.New("event is not a JSON object")
	}
	if typ == "" {
		return Event{}, errors.New("event has no payload.type")
	}
	ev := Event{Type: typ}
	// A non-string directory is ignored, not fatal.
	ev.Directory, _ = jsonString(dirRaw)
	switch {
	case typ == EventToolsChanged:
		ev.Kind, ev.Server = KindServerFailed, stringProperty(props, "server")
	case typ == EventInstanceDisposed:
		ev.Kind = KindInstanceGone
		if pd := stringProperty(props, "directory"); pd != "" {
			ev.Directory = pd
		}
	case typ == EventGlobalDisposed:
		ev.Kind, ev.Directory = KindAllGone, ""
	case strings.HasPrefix(typ, "session.") || strings.HasPrefix(typ, "message."):
		ev.Kind = KindActivity
	}
	if ev.Directory == "global" {
		ev.Directory = ""
	}
	return ev, nil
}

// needsProperties reports whether ParseEvent reads anything from an event
// type's properties.
func needsProperties(typ string) bool {
	return typ == EventToolsChanged || typ == EventInstanceDisposed
}

// stringProperty is the string member key of the properties object props,
// or "" when props is not an object or key is missing or not a string.
func stringProperty(props []byte, key string) string {
	s := jscan{b: props}
	if len(props) == 0 || !s.open() {
		return ""
	}
	for first := true; ; {
		k, ok := s.member(&first)
		if !ok {
			return ""
		}
		if string(k) == key {
			v, _ := jsonString(s.skip())
			return v
		}
		s.skip()
	}
}
