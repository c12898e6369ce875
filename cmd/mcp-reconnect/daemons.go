package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

// runningDaemon is one daemon a command talks to: from the registry, or named by
// --status-addr.
type runningDaemon struct {
	entry  registry.Entry // zero when --status-addr named one not registered
	client *statusapi.Client
}

// daemonChoice is how the user picked daemons: --status-addr, --url, --all.
type daemonChoice struct {
	statusAddr, url string
	all             bool
}

// register adds --status-addr and --url (described by urlHelp).
func (c *daemonChoice) register(fs *pflag.FlagSet, urlHelp string) {
	fs.StringVar(&c.statusAddr, "status-addr", "", "the daemon's status API; by default the registry of running daemons says [$MCP_RECONNECT_STATUS_ADDR]")
	fs.StringVar(&c.url, "url", "", urlHelp)
}

// find returns the daemons the choice names, after
// $MCP_RECONNECT_STATUS_ADDR (and no other variable) is applied.
// --status-addr wins (its token comes from the registry when the daemon
// is registered); otherwise the registry's daemons, those watching --url
// if given.
func (c *daemonChoice) find(fs *pflag.FlagSet) ([]runningDaemon, error) {
	if err := applyEnv(fs, "status-addr"); err != nil {
		return nil, err
	}
	reg, regErr := registry.Default()
	if c.statusAddr != "" {
		d := runningDaemon{client: &statusapi.Client{Addr: c.statusAddr}}
		if regErr == nil {
			if e, ok, _ := reg.ByStatusAddr(c.statusAddr); ok {
				d.entry, d.client.Token = e, e.Token
			}
		}
		return []runningDaemon{d}, nil
	}
	if regErr != nil {
		return nil, regErr
	}
	ents, err := reg.List()
	if err != nil {
		return nil, err
	}
	if len(ents) == 0 {
		return nil, fmt.Errorf("no mcp-reconnect daemon is running for this user (none registered in %s): start one with `mcp-reconnect watch` or `mcp-reconnect run -- opencode`, or pass --status-addr", reg.Dir)
	}
	var out []runningDaemon
	for _, e := range ents {
		if c.url == "" || e.Watches(c.url) {
			out = append(out, runningDaemon{entry: e, client: &statusapi.Client{Addr: e.StatusAddr, Token: e.Token}})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no running mcp-reconnect daemon watches %s; running:\n%s", c.url, describe(ents))
	}
	return out, nil
}

// describe lists daemons for a person choosing one.
func describe(ents []registry.Entry) string {
	var b strings.Builder
	for _, e := range ents {
		fmt.Fprintf(&b, "  pid %d  --url %s  --status-addr %s  (since %s)\n", e.PID, termsafe.Line(strings.Join(e.URLs, ",")), termsafe.Line(e.StatusAddr), e.Started.Local().Format(time.DateTime))
	}
	return strings.TrimRight(b.String(), "\n")
}

// daemonView is a daemon as `status --json` shows it: never its token.
type daemonView struct {
	PID        int               `json:"pid,omitempty"`
	URLs       []string          `json:"urls,omitempty"`
	StatusAddr string            `json:"status_addr"`
	Version    string            `json:"version,omitempty"`
	Started    *time.Time        `json:"started,omitempty"`
	Status     *statusapi.Status `json:"status,omitempty"`
	Error      string            `json:"error,omitempty"`
}

// showStatus prints the status of one daemon as before (table or its
// Status JSON), or of several as one block each ({"daemons": [...]} in
// JSON). It fails when no daemon answered.
func showStatus(ctx context.Context, w io.Writer, ds []runningDaemon, asJSON bool) error {
	if len(ds) == 1 {
		st, err := ds[0].client.Status(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return writeIndentedJSON(w, st)
		}
		return statusapi.WriteTable(w, st, time.Now())
	}
	views := make([]daemonView, 0, len(ds))
	var errs []error
	for _, d := range ds {
		v := viewOf(d.entry)
		v.StatusAddr = d.client.Addr
		st, err := d.client.Status(ctx)
		if err != nil {
			v.Error = err.Error()
			errs = append(errs, err)
		} else {
			v.Status = &st
		}
		views = append(views, v)
	}
	if asJSON {
		if err := writeIndentedJSON(w, map[string]any{"daemons": views}); err != nil {
			return err
		}
	} else {
		for i, v := range views {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "mcp-reconnect pid %d, status api %s\n", v.PID, termsafe.Line(v.StatusAddr))
			if v.Status == nil {
				fmt.Fprintf(w, "  not answering: %s\n", termsafe.Line(v.Error))
				continue
			}
			if err := statusapi.WriteTable(w, *v.Status, time.Now()); err != nil {
				return err
			}
		}
	}
	if len(errs) > 0 && len(errs) == len(ds) {
		return errs[0] // no daemon answered
	}
	return nil
}

// reconnectCall is one POST /reconnect to make.
type reconnectCall struct {
	daemon runningDaemon
	req    statusapi.ReconnectRequest
}

// armedCalls is `reconnect --all --directory dir` without --url: dir is
// retried in each daemon, and in each OpenCode server of it, where it is
// armed already, and armed in none. Arming makes that OpenCode start the
// directory's MCP servers (rule 13), and --all names no server; the
// status API has the same guard for a daemon that watches several. (A
// directory disarmed between the status read and the request is armed
// again there: it was in use a moment ago.)
func armedCalls(ctx context.Context, ds []runningDaemon, dir string, names []string) ([]reconnectCall, error) {
	var calls []reconnectCall
	for _, d := range ds {
		st, err := d.client.Status(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range st.Servers {
			if slices.ContainsFunc(s.Directories, func(ds reconnect.DirSnapshot) bool { return ds.Directory == dir }) {
				calls = append(calls, reconnectCall{d, statusapi.ReconnectRequest{Directory: dir, Servers: names, URL: s.URL}})
			}
		}
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("%s is armed in no running daemon, and --all arms nothing new (arming a directory makes OpenCode start its MCP servers); name the OpenCode server to arm it in with --url", termsafe.Line(dir))
	}
	return calls, nil
}

// errSeveral is returned when a mutation would have to guess a daemon.
var errSeveral = errors.New("several mcp-reconnect daemons are running")
