package daemon

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/mcp-reconnect/mcp-reconnect/internal/netwatch"
)

// watchNetwork tells every engine about network changes that matter: a
// change of interfaces or default routes (a VPN connecting, Wi-Fi joining
// a network) and a wake from sleep are the same news to an engine
// (NetworkChanged): failed servers are checked at once, and connected
// remote ones connected again for a fresh session, since a connection
// held across the change may be dead while OpenCode still says connected.
// When the machine's source of network changes cannot run, wakes are
// still watched.
func watchNetwork(ctx context.Context, cfg Config, all []*watched, log *slog.Logger) {
	changed := func(c netwatch.Change) {
		if c.Woke {
			log.Info("woke from sleep", "slept", c.Wake.Slept)
		} else {
			log.Debug("network changed")
		}
		for _, w := range all {
			w.eng.NetworkChanged()
		}
	}
	err := netwatch.WatchChanges(ctx, cmp.Or(cfg.NetSource, netwatch.New()), cfg.Wake, changed)
	if err == nil || ctx.Err() != nil {
		return
	}
	log.Warn("not watching network changes; watching wakes from sleep only", "err", err)
	_ = netwatch.WatchChanges(ctx, nil, cfg.Wake, changed)
}
