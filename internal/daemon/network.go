package daemon

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/mcp-reconnect/mcp-reconnect/internal/netwatch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// watchNetwork tells every engine about network changes that matter: a
// change of interfaces or routes (NetworkChanged: failed servers are
// checked at once) and a wake from sleep, the major change (Woke: remote
// sessions are renewed too, since after a sleep they are often dead while
// every interface looks the same). When the machine's source of network
// changes cannot run, wakes are still watched.
func watchNetwork(ctx context.Context, cfg Config, all []*watched, log *slog.Logger) {
	changed := func(c netwatch.Change) {
		tell := (*reconnect.Engine).NetworkChanged
		if c.Major {
			log.Info("woke from sleep", "slept", c.Wake.Slept)
			tell = (*reconnect.Engine).Woke
		} else {
			log.Debug("network changed")
		}
		for _, w := range all {
			tell(w.eng)
		}
	}
	err := netwatch.WatchChanges(ctx, cmp.Or(cfg.NetSource, netwatch.New()), cfg.Wake, changed)
	if err == nil || ctx.Err() != nil {
		return
	}
	log.Warn("not watching network changes; watching wakes from sleep only", "err", err)
	_ = netwatch.WatchChanges(ctx, nil, cfg.Wake, changed)
}
