package reconnect

import (
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// Event types the engine publishes (the daemon's own /events).
const (
	EventArmed          = "armed"
	EventDisarmed       = "disarmed"
	EventAttempt        = "reconnect.attempt"
	EventReconnected    = "reconnected"
	EventGaveUp         = "gave_up"
	EventBackingOff     = "backing_off"
	EventStreamUp       = "stream.connected"
	EventStreamDown     = "stream.disconnected"
	EventNeedsUserInput = "needs_user"
	EventNetworkChanged = "network.changed"
)

// Event is something the engine did or saw, for /events and tests.
type Event struct {
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	URL       string    `json:"url,omitempty"`
	Directory string    `json:"directory,omitempty"`
	Server    string    `json:"server,omitempty"`
	// Attempt is the attempt number in the current episode.
	Attempt int `json:"attempt,omitempty"`
	// Tier is "fast" or "slow" for attempt and backing_off events.
	Tier string `json:"tier,omitempty"`
	// Next is when the next attempt is due (backing_off).
	Next *time.Time `json:"next,omitempty"`
	// Reason says why a directory was armed or disarmed, or what the user must do.
	Reason string `json:"reason,omitempty"`
	// Error is the last error OpenCode reported for the server.
	Error string `json:"error,omitempty"`
}

// Tiers of a failing server.
const (
	TierFast    = "fast"
	TierSlow    = "slow"
	TierStopped = "stopped" // slow-interval 0: no attempt until reset
)

// Snapshot is what the engine knows, for GET /status.
type Snapshot struct {
	URL string `json:"url"`
	// OpenCode is what was detected of the server (nil before that).
	OpenCode *OpenCodeInfo `json:"opencode,omitempty"`
	// Processes is the MCP process view of a local OpenCode (nil when
	// OpenCode is not a local process of this user, or not yet seen).
	Processes *procview.Status `json:"processes,omitempty"`
	Stream    StreamState      `json:"stream"`
	// Directories is nil only in a Summary (left out of its JSON).
	Directories []DirSnapshot `json:"directories,omitzero"`
}

// OpenCodeInfo is what the daemon knows of the OpenCode server itself.
type OpenCodeInfo struct {
	Generation string `json:"generation"`
	Version    string `json:"version,omitempty"`
	// RunsWithout names each thing the daemon would use that this server
	// lacks (read from its own API description), with what the daemon
	// does instead: "config route (GET /api/config): server kinds from the
	// config files".
	RunsWithout []string `json:"runs_without,omitempty"`
}

// StreamState describes the /global/event subscription.
type StreamState struct {
	Connected  bool      `json:"connected"`
	Since      time.Time `json:"since,omitzero"`
	Reconnects int       `json:"reconnects"`
	LastError  string    `json:"last_error,omitempty"`
}

// DirSnapshot is one armed directory.
type DirSnapshot struct {
	Directory string    `json:"directory"`
	ArmedBy   string    `json:"armed_by"`
	ArmedAt   time.Time `json:"armed_at"`
	LastCheck time.Time `json:"last_check,omitzero"`
	NextCheck time.Time `json:"next_check,omitzero"`
	// LastError is set while the last status read failed.
	LastError string           `json:"last_error,omitempty"`
	Servers   []ServerSnapshot `json:"servers"`
}

// ServerSnapshot is one MCP server in one directory.
type ServerSnapshot struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Attempts made in the current episode.
	Attempts   int    `json:"attempts"`
	Tier       string `json:"tier,omitempty"`
	Connecting bool   `json:"connecting,omitempty"`
	// WaitingForSlot is set while a due attempt waits for a connect slot.
	WaitingForSlot bool      `json:"waiting_for_slot,omitempty"`
	NextAttempt    time.Time `json:"next_attempt,omitzero"`
	LastAttempt    time.Time `json:"last_attempt,omitzero"`
	LastReconnect  time.Time `json:"last_reconnect,omitzero"`
	// Hint tells the user what to do when the daemon cannot help.
	Hint string `json:"hint,omitempty"`
	// RateLimited is set while the failed server's last attempt was
	// answered 429 by the server (OpenCode 2): that attempt did not
	// count, and the next waits until NextAttempt.
	RateLimited bool `json:"rate_limited,omitempty"`
}

// ReasonRateLimited is the reason of a backing_off event for an attempt
// the server answered 429.
const ReasonRateLimited = "rate limited by the server"

// PendingStuckAfter is how long a server may stay pending (2.x) before its
// start is reported stuck: OpenCode 2's default startup and catalog
// timeouts (30 s each) and 10 s more.
const PendingStuckAfter = 70 * time.Second

// stuckHint is the note for a start that looks stuck.
func stuckHint(d time.Duration) string {
	return "pending for " + d.Round(time.Second).String() + ", past OpenCode's startup and catalog timeouts: its start looks stuck (see OpenCode's log; restarting OpenCode or `opencode mcp` may tell why)"
}
