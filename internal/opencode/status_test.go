package opencode

import (
	"slices"
	"testing"
)

// One list of statuses and one hint per status the user must fix: the
// engine, status, doctor and the events said needs_client_registration's
// fix in two wordings before.
func TestStatusesAndTheirHints(t *testing.T) {
	if !slices.Equal(StatusesV2[:1], []string{StatusConnected}) || !KnownStatus(StatusPending) || KnownStatus("disconnected") {
		t.Fatalf("statuses %v", StatusesV2)
	}
	for _, s := range StatusesV1 {
		if !slices.Contains(StatusesV2, s) {
			t.Errorf("%s is 1.x's but not 2.x's", s)
		}
	}
	if h := UserHint(StatusNeedsAuth, "my srv"); h != "run: opencode mcp auth 'my srv'" {
		t.Errorf("needs_auth hint %q", h)
	}
	if h := UserHint(StatusNeedsClientRegistration, "x"); h == "" {
		t.Error("needs_client_registration has no hint")
	}
	for _, s := range []string{StatusConnected, StatusFailed, StatusDisabled, StatusPending} {
		if h := UserHint(s, "x"); h != "" {
			t.Errorf("%s has a hint %q", s, h)
		}
	}
}
