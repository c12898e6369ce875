package daemon

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/mcp-reconnect/mcp-reconnect/internal/netwatch"
)

// watchNetwork tells every engine about network changes: a wake from
// sleep or a change that moved the way out (netwatch.Uplink: a VPN taking
// over the default route) may have killed a connection held across it,
// while OpenCode still says connected, so failed servers are checked at
// once and connected remote ones connected again for a fresh session
// (NetworkChanged); any other change (a container bridge coming up) kills
// nothing and only makes failed servers be checked at once
// (InterfacesChanged). When the machine's source of network changes cannot
// run, wakes are still watched.
func watchNetwork(ctx context.Context, cfg Config, all []*watched, log *slog.Logger) {
	changed := func(c netwatch.Change) {
		if c.Woke {
			log.Info("woke from sleep", "slept", c.Wake.Slept)
		} else {
			log.Debug("network changed", "uplink", c.Uplink)
		}
		for _, w := range all {
			if c.Woke || c.Uplink {
				w.NetworkChanged()
			} else {
				w.InterfacesChanged()
			}
		}
	}
	err := netwatch.WatchChanges(ctx, cmp.Or(cfg.NetSource, netwatch.New()), cfg.Wake, changed)
	if err == nil || ctx.Err() != nil {
		return
	}
	log.Warn("not watching network changes; watching wakes from sleep only", "err", err)
	_ = netwatch.WatchChanges(ctx, nil, cfg.Wake, changed)
}
