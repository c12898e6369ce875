package netwatch

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"
)

// Poll compares the interface list and addresses every Interval: the
// fallback where no change notification is available.
type Poll struct {
	// Interval between looks (default 5s).
	Interval time.Duration
}

// Run implements Source.
func (p Poll) Run(ctx context.Context, changes chan<- struct{}) error {
	every := p.Interval
	if every <= 0 {
		every = 5 * time.Second
	}
	last := snapshot()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if now := snapshot(); now != last {
			last = now
			notify(changes)
		}
	}
}

// snapshot describes the interfaces, their flags and addresses.
func snapshot() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return "error: " + err.Error()
	}
	var parts []string
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		var as []string
		for _, a := range addrs {
			as = append(as, a.String())
		}
		sort.Strings(as)
		parts = append(parts, fmt.Sprintf("%s %v %s", ifc.Name, ifc.Flags, strings.Join(as, ",")))
	}
	sort.Strings(parts)
	return strings.Join(parts, "\n")
}
