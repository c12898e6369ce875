package launch

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (a child's
// waiter, a signal relay).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
