package service

import (
	"bytes"
	"strings"
	"testing"
)

// The unit lets systemd know more than "the process exists": the daemon
// says when it is ready (Type=notify) and pings a watchdog while its
// engines turn, so a hung daemon is killed and, as a failure, restarted.
// Only the main process may notify (a child that inherited
// $NOTIFY_SOCKET cannot speak for it), and the unit still verifies.
func TestUnitIsNotifyWithWatchdog(t *testing.T) {
	env, _ := testEnv(t, nil)
	f, err := mustNew(t, env).p.render(Spec{Binary: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify\n", "NotifyAccess=main\n", "WatchdogSec=30\n", "Restart=on-failure\n"} {
		if !bytes.Contains(f.Content, []byte(want)) {
			t.Errorf("unit lacks %q:\n%s", want, f.Content)
		}
	}
	if strings.Contains(string(f.Content), "Type=simple") {
		t.Errorf("unit is still Type=simple:\n%s", f.Content)
	}
	if out, err := verifyUnit(t, f.Content); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
