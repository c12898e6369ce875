// Package doctor answers "can mcp-reconnect reach, authenticate and use
// this OpenCode?": reachability, credentials (and where the password came
// from), which generation and version answers, whether the server's own
// API description (1.x GET /doc, 2.x GET /openapi.json) still offers every
// route, MCP status and event the daemon relies on (so an
// OpenCode upgrade that breaks us is caught by a command, not by a silent
// failure), which servers need attention, and which MCP processes of this
// machine look orphaned or run twice (processes.go; reap.go ends orphans).
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
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

// TestedVersionV2 is the OpenCode 2.x release the daemon is tested
// against.
const TestedVersionV2 = "2.1.2"

// needs is what the daemon relies on in one generation's own API
// description.
type needs struct {
	// Doc is the route that serves the description.
	Doc string
	// Routes the client calls: one whose Without is empty, or named in
	// Needed, fails when missing; another only warns.
	Routes []opencode.Capability
	Needed []string
	// Statuses are the MCP statuses the daemon knows on this generation.
	Statuses []string
	// Events are the event types the daemon acts on that the description
	// must list (none on 2.1.2, whose description names no event type:
	// an event's data is an opaque string there, and only the stream
	// check sees the stream work).
	Events []string
	// Location (2.x) is the query parameter that names the directory: the
	// status, connect and config routes must take it, or every directory
	// would be read as OpenCode's own. Answer is the property the status
	// route's answer must have (2.x: "data", the list of servers).
	Location, Answer string
}

// needV1 is what the 1.x client relies on: it cannot work without any of
// its routes. server.heartbeat is sent but not described in /doc; without
// it the stream is merely re-subscribed after each silent 30 s.
var needV1 = needs{
	Doc: "GET /doc",
	Routes: []opencode.Capability{
		{Route: "GET /global/health"}, {Route: "GET /global/event"}, {Route: "GET /mcp"},
		{Route: "POST /mcp/{name}/connect"}, {Route: "GET /config"},
	},
	Statuses: opencode.StatusesV1,
	Events:   []string{opencode.EventToolsChanged, opencode.EventInstanceDisposed, opencode.EventGlobalDisposed, opencode.EventServerConnected},
}

// needV2 is what the 2.x client relies on: the routes of its
// capabilities (caps); it runs without all but the needed ones.
func needV2(caps []opencode.Capability) needs {
	return needs{Doc: "GET /openapi.json", Routes: caps, Needed: []string{opencode.CapStatus, opencode.CapConnect, opencode.CapEvents}, Statuses: opencode.StatusesV2,
		Location: "location", Answer: "data"}
}

// checkDoc compares a server's own OpenAPI description (body) with what
// the daemon relies on (need): each route, the MCP status values of the
// component schemas named MCPStatus… (1.x) or Mcp.Status… (2.x), and the
// event types among every component schema's "type" values. Each missing
// or different thing is its own line, naming it.
func checkDoc(body []byte, need needs) []Check {
	d, err := parseDesc(body)
	if err != nil {
		return []Check{{Fail, "api description", need.Doc + " is not an OpenAPI document: " + err.Error()}}
	}
	var checks []Check
	var offered []string
	for _, r := range need.Routes {
		if method, p, _ := strings.Cut(r.Route, " "); d.ops[method+" "+template(p)] != nil {
			op := d.ops[method+" "+template(p)]
			offered = append(offered, r.Route)
			scoped := r.Name == opencode.CapStatus || r.Name == opencode.CapConnect || r.Name == opencode.CapConfig
			if need.Location != "" && scoped && !slices.ContainsFunc(op.params, func(p any) bool {
				m, _ := p.(map[string]any) // 2.1.2: "location", a deepObject whose key is directory
				return m["in"] == "query" && (m["name"] == need.Location || m["name"] == need.Location+"[directory]")
			}) {
				checks = append(checks, Check{Fail, "api routes", r.Route + " takes no " + need.Location + "[directory]: every directory would be read as OpenCode's own"})
			}
			if need.Answer != "" && r.Name == opencode.CapStatus && !d.answerHas(op.op, need.Answer) {
				checks = append(checks, Check{Fail, "api routes", r.Route + ` answers without "` + need.Answer + `": the daemon would read no MCP server`})
			}
			continue
		}
		sev, detail := Fail, "OpenCode does not describe "+r.Route
		if r.Without != "" {
			detail += fmt.Sprintf(" (%s); mcp-reconnect runs without it: %s", r.Name, r.Without)
			if !slices.Contains(need.Needed, r.Name) {
				sev = Warn
			}
		}
		checks = append(checks, Check{sev, "api routes", detail})
	}
	if len(offered) > 0 {
		checks = append(checks, Check{OK, "api routes", strings.Join(offered, ", ")})
	}
	var statusSchemas []string
	for n := range d.schemas {
		if k := strings.ToLower(strings.NewReplacer(".", "", "_", "", "-", "").Replace(n)); strings.HasPrefix(k, "mcpstatus") {
			statusSchemas = append(statusSchemas, n)
		}
	}
	slices.Sort(statusSchemas)
	checks = append(checks, judgeStatuses(need.Statuses, d.literals("status", statusSchemas...))...)
	if len(need.Events) == 0 {
		// 2.1.2's description names no event types (an event's data is an
		// opaque string there): say what cannot be checked.
		return append(checks, Check{Info, "event types", fmt.Sprintf("the description names none; %s, %s and session.* are seen only when they happen", opencode.EventStatusChangedV2, opencode.EventLocationShutdownV2)})
	}
	if noEvent := absent(need.Events, d.literals("type", slices.Sorted(maps.Keys(d.schemas))...)); len(noEvent) > 0 {
		return append(checks, Check{Fail, "events", "OpenCode no longer publishes " + strings.Join(noEvent, ", ")})
	}
	return append(checks, Check{OK, "events", strings.Join(need.Events, ", ")})
}

// desc is what doctor reads of an OpenAPI document: its operations, as
// "METHOD template" (method upper case, parameter names erased), and its
// component schemas, as plain JSON: a part shaped otherwise than OpenAPI
// says finds nothing, never an error.
type desc struct {
	ops     map[string]*operation
	schemas map[string]any
}

// operation is one route of the description: its object, and its
// parameters with those of its path.
type operation struct {
	op     map[string]any
	params []any
}

// answerHas reports whether op's 200 JSON answer (inline, or one $ref to
// a component schema) has property prop, or describes no properties.
func (d desc) answerHas(op map[string]any, prop string) bool {
	s := dig(op, "responses", "200", "content", "application/json", "schema")
	if ref, ok := s["$ref"].(string); ok {
		s, _ = d.schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	props := dig(s, "properties")
	_, ok := props[prop]
	return ok || props == nil
}

// dig follows keys through nested JSON objects; nil where one is not.
func dig(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ = m[k].(map[string]any)
	}
	return m
}

func parseDesc(b []byte) (desc, error) {
	var doc struct{ Paths, Components any }
	if err := json.Unmarshal(b, &doc); err != nil {
		return desc{}, errors.New("not a JSON object")
	}
	paths, ok := doc.Paths.(map[string]any)
	if !ok {
		return desc{}, errors.New(`no "paths" object`)
	}
	d := desc{ops: map[string]*operation{}}
	for p, item := range paths {
		ops, _ := item.(map[string]any)
		shared, _ := ops["parameters"].([]any)
		for method, v := range ops {
			op, _ := v.(map[string]any)
			own, _ := op["parameters"].([]any)
			d.ops[strings.ToUpper(method)+" "+template(p)] = &operation{op: op, params: append(slices.Clip(own), shared...)}
		}
	}
	comp, _ := doc.Components.(map[string]any)
	d.schemas, _ = comp["schemas"].(map[string]any)
	return d, nil
}

// template erases the parameter names of a route, so that routes compare
// by shape: OpenCode 2 calls the server "{server}" where the client says
// "{name}".
func template(route string) string {
	segs := strings.Split(route, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

// literals are the string values (enum or const) that property prop of
// the named component schemas allows, each once, in the order found: of
// each schema and its anyOf, oneOf and allOf members, however nested.
// (OpenCode's descriptions spell each status and event out in a schema of
// its own: a $ref is not followed.)
func (d desc) literals(prop string, names ...string) []string {
	var out []string
	var walk func(v any, inProp bool)
	walk = func(v any, inProp bool) {
		m, _ := v.(map[string]any)
		if inProp {
			enum, _ := m["enum"].([]any)
			for _, x := range append(enum, m["const"]) {
				if s, ok := x.(string); ok && !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		} else if props, ok := m["properties"].(map[string]any); ok {
			walk(props[prop], true)
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			list, _ := m[k].([]any)
			for _, x := range list {
				walk(x, inProp)
			}
		}
	}
	for _, n := range names {
		walk(d.schemas[n], false)
	}
	return out
}

// judgeStatuses compares the MCP status values a description lists with
// the ones the daemon knows. A value it does not know fails: the daemon
// leaves a server in it alone, whatever it means, and a renamed `failed`
// would never be retried. A value it knows that the description lacks is
// harmless (OpenCode 2.1.2 has no needs_client_registration: it never
// reports it), unless it is `failed`, the one status the daemon acts on.
func judgeStatuses(known, listed []string) []Check {
	const name, where = "mcp statuses", "in the MCPStatus schemas"
	var checks []Check
	for _, s := range absent(listed, known) {
		checks = append(checks, Check{Fail, name, fmt.Sprintf("MCP status `%s` %s is unknown to mcp-reconnect: it would leave a server in it alone, whatever it means (a renamed `failed` would never be retried)", s, where)})
	}
	if !slices.Contains(listed, opencode.StatusFailed) {
		found := "none"
		if len(listed) > 0 {
			found = "`" + strings.Join(listed, "`, `") + "`"
		}
		checks = append(checks, Check{Fail, name, fmt.Sprintf("MCP status `failed` is not %s (found %s): mcp-reconnect reconnects only failed servers", where, found)})
	}
	if len(checks) > 0 {
		return checks
	}
	lacked := absent(known, listed)
	checks = append(checks, Check{OK, name, strings.Join(absent(known, lacked), ", ")})
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
// description (1.x GET /doc, 2.x GET /openapi.json), the event stream,
// the daemon's armed directories and the named directories. oo carries
// the credentials and, in tests, the transport. (The MCP processes of
// this machine are FindProcesses', whether OpenCode answered or not.)
func Run(ctx context.Context, rawURL string, oo opencode.Options, o Options) []Check {
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
	var c client
	var need needs
	tested, stream := TestedVersion, "GET /global/event"
	if gen == opencode.V2 {
		v2oo := oo
		v2oo.Username = "" // 2.x authenticates as "opencode", always
		v, err := opencode.NewV2(rawURL, v2oo)
		if err != nil {
			return append(checks, Check{Fail, "reachable", err.Error()})
		}
		c, need, tested, stream = v, needV2(v.Capabilities()), TestedVersionV2, "GET /api/event"
		checks = append(checks, Check{OK, "generation", fmt.Sprintf("OpenCode 2.x, version %s (pid %d)", version, pid)})
	} else {
		v, err := opencode.New(rawURL, oo)
		if err != nil {
			return append(checks, Check{Fail, "reachable", err.Error()})
		}
		c, need = v, needV1
		checks = append(checks, Check{OK, "generation", "OpenCode 1.x, version " + version})
	}
	if oo.Password == "" && gen == opencode.V2 {
		checks = append(checks, Check{OK, "authenticated", "this OpenCode 2.x answers without a password"})
	} else {
		checks = append(checks, Check{OK, "authenticated", "credentials accepted"})
	}
	if version == tested {
		checks = append(checks, Check{OK, "version", version})
	} else {
		checks = append(checks, Check{Warn, "version", fmt.Sprintf("%s; mcp-reconnect is tested with %s (the checks below tell whether it still fits)", version, tested)})
	}
	if body, err := c.Doc(ctx); err != nil {
		checks = append(checks, Check{Fail, "api description", err.Error()})
	} else {
		checks = append(checks, checkDoc(body, need)...)
	}
	checks = append(checks, streamCheck(ctx, c, stream))
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
func streamCheck(ctx context.Context, c client, route string) Check {
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

// client is what doctor needs of either generation's client.
type client interface {
	URL() string
	MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error)
	FirstEvent(ctx context.Context, wait time.Duration) (string, error)
	Doc(ctx context.Context) ([]byte, error)
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
func serverChecks(ctx context.Context, c client, o Options) []Check {
	var checks []Check
	if o.Daemon != nil {
		st, err := o.Daemon.Status(ctx)
		// The registry found this daemon by the normalised URL; its view
		// is read the same way ("localhost" is 127.0.0.1).
		var i int
		if err == nil {
			i = slices.IndexFunc(st.Servers, func(s statusapi.OpenCodeStatus) bool {
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
