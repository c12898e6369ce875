package daemon

import (
	"context"
	"log/slog"

	"github.com/mcp-reconnect/mcp-reconnect/internal/netwatch"
)

// watchNetwork tells every engine about network changes that matter: a
// change of interfaces or routes (NetworkChanged: failed servers are
// checked at once) and a wake from sleep, the major change (Woke: remote
// sessions are renewed too, since after a sleep they are often dead while
// every interface looks the same). When the machine's source of network
// changes cannot run, wakes are still watched.
func watchNetwork(ctx context.Context, cfg Config, all []*watched, log *slog.Logger) {
	changed := func(c netwatch.Change) {
		if c.Major {
			log.Info("woke from sleep", "slept", c.Wake.Slept)
		} else {
			log.Debug("network changed")
		}
		for _, w := range all {
			if c.Major {
				w.eng.Woke()
			} else {
				w.eng.NetworkChanged()
			}
		}
	}
	src := cfg.NetSource
	if src == nil {
		src = netwatch.New()
	}
	err := netwatch.WatchChanges(ctx, src, cfg.Wake, changed)
	if err == nil || ctx.Err() != nil {
		return
	}
	log.Warn("not watching network changes; watching wakes from sleep only", "err", err)
	_ = netwatch.WatchChanges(ctx, nil, cfg.Wake, changed)
}
