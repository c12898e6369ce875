// Package sdnotify tells systemd how a Type=notify service is doing: the
// sd_notify(3) protocol, a datagram of NAME=VALUE lines sent to the unix
// socket named by $NOTIFY_SOCKET. READY=1 says the service is up, and
// WATCHDOG=1, sent more often than $WATCHDOG_USEC, says it still works:
// a unit with WatchdogSec= is restarted when the pings stop.
//
// It is the protocol only, in the standard library: no libsystemd, and
// nothing happens where $NOTIFY_SOCKET is unset (launchd, a container, a
// terminal).
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// States a service sends.
const (
	// Ready: start-up is finished.
	Ready = "READY=1"
	// Watchdog: a keep-alive ping.
	Watchdog = "WATCHDOG=1"
	// Stopping: the service is shutting down.
	Stopping = "STOPPING=1"
)

// Notifier sends states to the service manager's socket. A nil Notifier
// sends nothing.
type Notifier struct {
	addr *net.UnixAddr
}

// FromEnv returns the Notifier of $NOTIFY_SOCKET as getenv reads it, nil
// when it is unset. An address in the abstract namespace starts with "@"
// (Go's net package maps it to the leading NUL the kernel wants); any
// other must be an absolute path. systemd's vsock addresses (for virtual
// machines) are refused.
func FromEnv(getenv func(string) string) (*Notifier, error) {
	name := getenv("NOTIFY_SOCKET")
	switch {
	case name == "":
		return nil, nil
	case strings.HasPrefix(name, "@") && len(name) > 1, strings.HasPrefix(name, "/"):
		return &Notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}, nil
	}
	return nil, fmt.Errorf("$NOTIFY_SOCKET %q is neither an absolute path nor an abstract socket (@name); not notifying the service manager", name)
}

// Notify sends the states, one line each, in one datagram.
func (n *Notifier) Notify(states ...string) error {
	if n == nil || len(states) == 0 {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.addr.Name, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(strings.Join(states, "\n"))); err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.addr.Name, err)
	}
	return nil
}

// WatchdogInterval is the watchdog timeout systemd set for this process
// ($WATCHDOG_USEC), 0 when there is none: unset, or meant for another
// process ($WATCHDOG_PID names one that is not pid, as when a service's
// child inherited the environment). Pings are due well within it; the
// usual choice is every half interval.
func WatchdogInterval(getenv func(string) string, pid int) (time.Duration, error) {
	usec := getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, nil
	}
	if p := getenv("WATCHDOG_PID"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("$WATCHDOG_PID %q is not a process id", p)
		}
		if n != pid {
			return 0, nil
		}
	}
	n, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("$WATCHDOG_USEC %q is not a positive number of microseconds", usec)
	}
	if n > uint64(maxInterval/time.Microsecond) {
		return 0, errors.New("$WATCHDOG_USEC is too large")
	}
	return time.Duration(n) * time.Microsecond, nil
}

// maxInterval bounds the interval so that it fits a time.Duration.
const maxInterval = 24 * 365 * time.Hour
