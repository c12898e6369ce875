package doctor

import (
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// Doctor tells the user what status and the daemon's events tell them:
// which statuses need them, and the fix, come from opencode alone. Doctor
// once worded needs_client_registration's fix otherwise; its answer is
// pinned here, and every other status is held to the owner's list.
func TestServerCheckAsksTheStatusOwner(t *testing.T) {
	got := serverCheck("/p", "reg", opencode.StatusNeedsClientRegistration, "", 0)
	want := []Check{{Fail, "/p: reg", "needs_client_registration: the server needs a registered OAuth client: add clientId to its config in opencode.json"}}
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("needs_client_registration: %+v, want %+v", got, want)
	}
	for _, status := range opencode.StatusesV2 {
		got := serverCheck("/p", "my srv", status, "", 0)
		hint := opencode.UserHint(status, "my srv")
		switch {
		case status == opencode.StatusFailed:
			if len(got) != 1 || got[0].Severity != Fail {
				t.Errorf("%s: %+v, want a failure", status, got)
			}
		case hint != "":
			if len(got) != 1 || got[0] != (Check{Fail, "/p: my srv", status + ": " + hint}) {
				t.Errorf("%s: %+v, want a failure with opencode's hint %q", status, got, hint)
			}
		case len(got) != 0:
			t.Errorf("%s is known and needs no user: %+v", status, got)
		}
	}
	if got := serverCheck("/p", "x", "disconnected", "", 0); len(got) != 1 || got[0].Severity != Fail {
		t.Errorf("a status opencode does not know: %+v, want a failure", got)
	}
}
