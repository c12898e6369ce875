// Package doctor answers "can mcp-reconnect reach, authenticate and use
// this OpenCode?": reachability, credentials (and where the password came
// from), which generation and version answers, whether the server's own
// API description (1.x GET /doc, 2.x GET /openapi.json) still offers every
// route, parameter, status value and event the daemon relies on (so an
// OpenCode upgrade that breaks us is caught by a command, not by a silent
// failure), which servers need attention, and which MCP processes of this
// machine look orphaned or run twice (processes.go; reap.go ends orphans).
package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

// TestedVersion is the OpenCode release the daemon is tested against.
const TestedVersion = "1.18.34"

// Severity of a check.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "FAIL"
	// Info is a fact worth knowing that is neither good nor bad.
	Info = "info"
)

// Check is one line of the report.
type Check struct {
	Severity string `json:"severity"`
	Name     string `json:"name"`
	Detail   string `json:"detail"`
}

// Route is a method and path of OpenCode's API.
type Route struct{ Method, Path string }

// Needs is what the daemon uses of OpenCode's API.
type Needs struct {
	Routes   []Route
	Statuses []string
	Events   []string
}

// Used is what this version of the daemon calls and understands.
var Used = Needs{
	Routes: []Route{
		{"GET", "/global/health"}, {"GET", "/global/event"}, {"GET", "/mcp"},
		{"POST", "/mcp/{name}/connect"}, {"GET", "/config"},
	},
	Statuses: opencode.StatusesV1,
	// server.heartbeat is sent but not described in /doc; without it the
	// stream is merely re-subscribed after each silent 30 s.
	Events: []string{opencode.EventToolsChanged, opencode.EventInstanceDisposed, opencode.EventGlobalDisposed, opencode.EventServerConnected},
}

// CheckDoc compares an OpenAPI document with what the daemon needs: its
// routes, the MCPStatus… component schemas' status values, and the event
// types among every component schema's "type" values.
func CheckDoc(doc []byte, need Needs) []Check {
	d, err := apidesc.Parse(doc)
	if err != nil {
		return []Check{{Fail, "api description", "GET /doc is not an OpenAPI document: " + err.Error()}}
	}
	var checks []Check
	var missing []string
	for _, r := range need.Routes {
		if _, ok := d.Offers(r.Method, r.Path); !ok {
			missing = append(missing, r.Method+" "+r.Path)
		}
	}
	if len(missing) > 0 {
		checks = append(checks, Check{Fail, "api routes", "OpenCode no longer offers " + strings.Join(missing, ", ")})
	} else {
		checks = append(checks, Check{OK, "api routes", fmt.Sprintf("all %d routes the daemon uses are offered", len(need.Routes))})
	}

	statuses := d.Components(statusComponents(d)...).Property("status").Literals()
	checks = append(checks, judgeStatuses(need.Statuses, statuses, "in the MCPStatus schemas", "")...)
	noEvent := absent(need.Events, d.Components(d.ComponentNames()...).Property("type").Literals())
	if len(noEvent) > 0 {
		checks = append(checks, Check{Fail, "events", "OpenCode no longer publishes " + strings.Join(noEvent, ", ")})
	} else {
		checks = append(checks, Check{OK, "events", strings.Join(need.Events, ", ")})
	}
	return checks
}

// judgeStatuses compares the MCP status values a description lists (found
// where; note, when set, is added to the ok line) with the ones the
// daemon knows. A value it does not know fails: the daemon leaves a
// server in it alone, whatever it means, and a renamed `failed` would
// never be retried. A value it knows that the description lacks is
// harmless (OpenCode 2.1.2 has no needs_client_registration: it never
// reports it), unless it is `failed`, the one status the daemon acts on.
func judgeStatuses(known, listed []string, where, note string) []Check {
	const name = "mcp statuses"
	var checks []Check
	for _, s := range absent(listed, known) {
		checks = append(checks, Check{Fail, name, fmt.Sprintf("MCP status `%s` %s is unknown to mcp-reconnect: it would leave a server in it alone, whatever it means (a renamed `failed` would never be retried)", s, where)})
	}
	if !slices.Contains(listed, opencode.StatusFailed) {
		checks = append(checks, Check{Fail, name, fmt.Sprintf("MCP status `failed` is not %s (found %s): mcp-reconnect reconnects only failed servers", where, quoteList(listed))})
	}
	if len(checks) > 0 {
		return checks
	}
	lacked := absent(known, listed)
	detail := strings.Join(absent(known, lacked), ", ")
	if note != "" {
		detail += " (" + note + ")"
	}
	checks = append(checks, Check{OK, name, detail})
	for _, s := range lacked {
		checks = append(checks, Check{Info, name, fmt.Sprintf("MCP status `%s` is not %s: this OpenCode never reports it", s, where)})
	}
	return checks
}

// absent are the items of want that have lacks, in want's order.
func absent(want, have []string) []string {
	return slices.DeleteFunc(slices.Clone(want), func(s string) bool { return slices.Contains(have, s) })
}

// Options for Run.
type Options struct {
	// Daemon, when set, is asked which directories are armed.
	Daemon *statusapi.Client
	// Directories are read directly (reading a directory's status starts
	// its MCP servers: only the ones the user names).
	Directories []string
	// PasswordSource says where the password given to Run came from, for
	// the report (never the password itself): "--password",
	// "env OPENCODE_PASSWORD", "config file /path", "service file /path";
	// "" when no password was given.
	PasswordSource string
	// ProcessTable, when set, opens the process table the process checks
	// read (procview.System): orphaned and duplicate MCP processes of
	// UID, found without OpenCode and without a daemon (FindProcesses).
	ProcessTable func() (procview.Table, error)
	// UID is the user whose processes count (os.Getuid()).
	UID int
	// Record, when set, is where the daemons wrote the MCP processes
	// they saw under live OpenCode processes (procview.DefaultRecord):
	// the evidence that proves an orphan after its OpenCode is gone.
	Record *procview.Record

	// localConfig reads the MCP servers configured for a directory:
	// dirConfig unless a test says otherwise.
	localConfig func(dir string) map[string]opencode.MCPEntry
}

// Run detects which OpenCode generation answers at rawURL (with
// opencode.Detect) and performs every check against it with the matching
// client: reachability, credentials, generation and version, the API
// description (1.x GET /doc, 2.x GET /openapi.json), the daemon's armed
// directories and the named directories; then, whether OpenCode answered
// or not, the MCP processes of this machine (FindProcesses). oo carries
// the credentials and, in tests, the transport.
func Run(ctx context.Context, rawURL string, oo opencode.Options, o Options) []Check {
	checks := runOpenCode(ctx, rawURL, oo, o)
	_, procs := FindProcesses(ctx, o)
	return append(checks, procs...)
}

// runOpenCode is Run's checks of OpenCode itself.
func runOpenCode(ctx context.Context, rawURL string, oo opencode.Options, o Options) []Check {
	checks := []Check{passwordCheck(o.PasswordSource, oo.Password != "")}
	gen, version, pid, err := opencode.Detect(ctx, rawURL, oo)
	url := opencode.Redact(rawURL)
	switch {
	case err != nil && gen == opencode.V2 && errors.Is(err, opencode.ErrUnauthorized):
		return append(checks, Check{OK, "reachable", url}, Check{OK, "generation", "OpenCode 2.x (its version is not shown without the password)"},
			Check{Fail, "authenticated", refusedV2(o.PasswordSource, oo.Password != "")})
	case err != nil && errors.Is(err, opencode.ErrUnauthorized):
		return append(checks, Check{OK, "reachable", url}, Check{Fail, "authenticated", "the server refused the credentials: " + err.Error()})
	case err != nil && gen == opencode.V1:
		return append(checks, Check{OK, "reachable", url}, Check{OK, "generation", "OpenCode 1.x, version " + version}, Check{Fail, "healthy", err.Error()})
	case err != nil:
		return append(checks, Check{Fail, "reachable", err.Error() + " (is OpenCode running there? set --url or OPENCODE_URL)"})
	}
	checks = append(checks, Check{OK, "reachable", url})
	var c statusReader
	switch gen {
	case opencode.V2:
		v2oo := oo
		v2oo.Username = "" // 2.x authenticates as "opencode", always
		v, err := opencode.NewV2(rawURL, v2oo)
		if err != nil {
			return append(checks, Check{Fail, "reachable", err.Error()})
		}
		c = v
		checks = append(checks, Check{OK, "generation", fmt.Sprintf("OpenCode 2.x, version %s (pid %d)", version, pid)})
		if oo.Password == "" {
			checks = append(checks, Check{OK, "authenticated", "this OpenCode 2.x answers without a password"})
		} else {
			checks = append(checks, Check{OK, "authenticated", "credentials accepted"})
		}
		if version == TestedVersionV2 {
			checks = append(checks, Check{OK, "version", version})
		} else {
			checks = append(checks, Check{Warn, "version", fmt.Sprintf("%s; mcp-reconnect is tested with %s (the checks below tell whether it still fits)", version, TestedVersionV2)})
		}
		body, err := v.Doc(ctx)
		if err != nil {
			checks = append(checks, Check{Fail, "api description", err.Error()})
		} else if desc, err := apidesc.Parse(body); err != nil {
			checks = append(checks, Check{Fail, "api description", "GET /openapi.json is not an OpenAPI document: " + err.Error()})
		} else {
			checks = append(checks, checkDescV2(desc, v.Capabilities())...)
		}
		stream := streamCheck(ctx, v, "GET /api/event")
		checks = append(checks, stream)
		if stream.Severity == OK && err == nil && !bytes.Contains(body, []byte(opencode.EventStatusChangedV2)) {
			// 2.1.2's description names no event types (an event's data
			// is an opaque string): the stream answering is the proof
			// there is; the types are seen only when they happen.
			checks = append(checks, Check{Info, "event types", fmt.Sprintf("the description names none; %s, %s and session.* are seen only when they happen", opencode.EventStatusChangedV2, opencode.EventLocationShutdownV2)})
		}
	default:
		v, err := opencode.New(rawURL, oo)
		if err != nil {
			return append(checks, Check{Fail, "reachable", err.Error()})
		}
		c = v
		checks = append(checks, Check{OK, "generation", "OpenCode 1.x, version " + version}, Check{OK, "authenticated", "credentials accepted"})
		if version == TestedVersion {
			checks = append(checks, Check{OK, "version", version})
		} else {
			checks = append(checks, Check{Warn, "version", fmt.Sprintf("%s; mcp-reconnect is tested with %s (the checks below tell whether it still fits)", version, TestedVersion)})
		}
		if doc, err := v.Doc(ctx); err != nil {
			checks = append(checks, Check{Fail, "api description", err.Error()})
		} else {
			checks = append(checks, CheckDoc(doc, Used)...)
		}
		checks = append(checks, streamCheck(ctx, v, "GET /global/event"))
	}
	return append(checks, serverChecks(ctx, c, o)...)
}

// streamWait bounds the stream check's wait for the first event: a
// healthy server sends server.connected at once.
const streamWait = 5 * time.Second

// streamCheck subscribes to the event stream once, as the daemon does:
// it must answer and send server.connected first, within streamWait.
// Without it the daemon hears of nothing and checks every idle interval
// only; and where the description names no event types (2.1.2), the wire
// is the only proof the stream works.
func streamCheck(ctx context.Context, c interface {
	FirstEvent(context.Context, time.Duration) (string, error)
}, route string) Check {
	const name = "event stream"
	typ, err := c.FirstEvent(ctx, streamWait)
	switch {
	case err != nil:
		return Check{Fail, name, err.Error() + ": mcp-reconnect would hear of no crash, and check every idle interval only"}
	case typ != opencode.EventServerConnected:
		return Check{Fail, name, fmt.Sprintf("%s's first event is %q, not %s: mcp-reconnect takes the stream for another program's", route, typ, opencode.EventServerConnected)}
	}
	return Check{OK, name, route + " answers; its first event is " + opencode.EventServerConnected}
}

// statusReader is what the server checks need of either generation's
// client.
type statusReader interface {
	URL() string
	MCPStatus(ctx context.Context, dir string) (map[string]opencode.ServerStatus, error)
}

// passwordCheck reports where the password came from, never the password.
func passwordCheck(source string, given bool) Check {
	switch {
	case !given:
		return Check{OK, "password", "none given (--password, OPENCODE_SERVER_PASSWORD, the config file or a 2.x service.json)"}
	case source == "":
		return Check{OK, "password", "given (its source was not reported)"}
	}
	return Check{OK, "password", "from " + source}
}

// refusedV2 explains a 2.x refusal.
func refusedV2(source string, given bool) string {
	const where = "OpenCode 2.x authenticates as user \"opencode\" with the password in ${XDG_STATE_HOME:-~/.local/state}/opencode/service.json (opencode service get password), or OPENCODE_PASSWORD for a foreground server; pass it with --password"
	switch {
	case !given:
		return "OpenCode 2.x asks for a password and none was given: " + where
	case source == "":
		return "OpenCode 2.x refused the password: " + where
	}
	return "OpenCode 2.x refused the password from " + source + ": " + where
}

// serverChecks lists the servers that need attention: those the daemon
// sees in armed directories, and those of the named directories.
func serverChecks(ctx context.Context, c statusReader, o Options) []Check {
	var checks []Check
	if o.Daemon != nil {
		st, err := o.Daemon.Status(ctx)
		// The registry found this daemon by the normalised URL; its view
		// is read the same way ("localhost" is 127.0.0.1).
		var i int
		if err == nil {
			i = slices.IndexFunc(st.Servers, func(s statusapi.ServerStatus) bool {
				return registry.NormalizeURL(s.URL) == registry.NormalizeURL(c.URL())
			})
		}
		switch {
		case err != nil:
			checks = append(checks, Check{Warn, "daemon", fmt.Sprintf("no mcp-reconnect daemon at %s: armed directories unknown", o.Daemon.Addr)})
		case i < 0:
			checks = append(checks, Check{Warn, "daemon", fmt.Sprintf("the mcp-reconnect daemon at %s does not watch %s: armed directories unknown", o.Daemon.Addr, opencode.Redact(c.URL()))})
		default:
			s := st.Servers[i]
			checks = append(checks, Check{OK, "daemon", fmt.Sprintf("watching, %d directories armed", len(s.Directories))})
			for _, d := range s.Directories {
				for _, sv := range d.Servers {
					checks = append(checks, serverCheck(d.Directory, sv.Name, sv.Status, sv.Error, sv.Attempts)...)
				}
			}
		}
	}
	for _, d := range o.Directories {
		st, err := c.MCPStatus(ctx, d)
		if err != nil {
			checks = append(checks, Check{Fail, "directory " + d, err.Error()})
			continue
		}
		if _, v2 := c.(*opencode.ClientV2); v2 && len(st) == 0 {
			checks = append(checks, Check{Info, "directory " + d, "no MCP server listed: OpenCode 2 lists a location's servers only a second or two after the read that boots it; run doctor again to see them"})
		}
		for _, name := range opencode.Names(st) {
			checks = append(checks, serverCheck(d, name, st[name].Status, st[name].Error, 0)...)
		}
	}
	return checks
}

// serverCheck is the check of one server in its status, nil when it needs
// no attention. Which statuses need the user, and what they must do, is
// opencode's to say (UserHint), and which it knows (KnownStatus): the
// engine asks the same.
func serverCheck(dir, name, status, errText string, attempts int) []Check {
	label := fmt.Sprintf("%s: %s", dir, name)
	if status == opencode.StatusFailed {
		detail := "failed"
		if errText != "" {
			detail += ": " + errText
		}
		if attempts > 0 {
			detail += fmt.Sprintf(" (mcp-reconnect has tried %d times)", attempts)
		}
		return []Check{{Fail, label, detail}}
	}
	if h := opencode.UserHint(status, name); h != "" {
		return []Check{{Fail, label, status + ": " + h}}
	}
	if status == "" || opencode.KnownStatus(status) {
		return nil
	}
	return []Check{{Fail, label, fmt.Sprintf("status %q is unknown to mcp-reconnect: it leaves the server alone, whatever the status means", status)}}
}

// Healthy reports whether no check failed.
func Healthy(checks []Check) bool {
	return !slices.ContainsFunc(checks, func(c Check) bool { return c.Severity == Fail })
}

// Write prints the checks, one per line. Names and details quote
// OpenCode and MCP servers (directories, server names, error strings):
// their control characters are shown escaped, never sent to the terminal.
func Write(w io.Writer, checks []Check) {
	for _, c := range checks {
		fmt.Fprintf(w, "%-4s  %-16s %s\n", c.Severity, termsafe.Line(c.Name), termsafe.Line(c.Detail))
	}
}
