package statusapi

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

// WriteTable renders a status for people: one block per OpenCode server,
// one line per directory and server. Every string that came from OpenCode
// or an MCP server (URLs, directories, names, statuses, errors) is shown
// with its control characters escaped (termsafe.Line): a tab would break
// the columns, and an escape sequence would drive the terminal.
func WriteTable(w io.Writer, st Status, now time.Time) error {
	esc := termsafe.Line
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, s := range st.Servers {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		stream := "disconnected"
		if s.Stream.Connected {
			stream = "connected"
		}
		if !s.Stream.Since.IsZero() {
			stream += " " + ago(now, s.Stream.Since)
		}
		if s.Stream.LastError != "" && !s.Stream.Connected {
			stream += " (" + esc(s.Stream.LastError) + ")"
		}
		fmt.Fprintf(tw, "opencode %s\tevents: %s\n", esc(s.URL), stream)
		if svc := s.Service; svc != nil {
			fmt.Fprintf(tw, "  OpenCode 2 service of %s (pid %d)\n", esc(svc.File), svc.PID)
			if len(svc.AlsoRegistered) > 0 {
				fmt.Fprintf(tw, "  also running, not followed: %s (one watch --service-file FILE each)\n", join(svc.AlsoRegistered, esc))
			}
		}
		if oc := s.OpenCode; oc != nil {
			fmt.Fprintf(tw, "  OpenCode %s %s\n", esc(oc.Generation), esc(oc.Version))
			for _, w := range oc.RunsWithout {
				fmt.Fprintf(tw, "  runs without %s\n", esc(w))
			}
		}
		writeProcesses(tw, s.Processes)
		if len(s.Directories) == 0 {
			fmt.Fprintln(tw, "  no directory armed yet (one is armed when it is used, or with --directory)")
			continue
		}
		fmt.Fprintln(tw, "  SERVER\tSTATUS\tATTEMPTS\tTIER\tNEXT\tNOTE")
		for _, d := range s.Directories {
			note := "armed by " + esc(d.ArmedBy)
			if d.LastError != "" {
				note = "status unavailable: " + esc(d.LastError)
			}
			fmt.Fprintf(tw, "  %s\t\t\t\t\t%s\n", esc(d.Directory), note)
			for _, sv := range d.Servers {
				next := ""
				if !sv.NextAttempt.IsZero() && sv.Status == opencode.StatusFailed {
					next = "in " + sv.NextAttempt.Sub(now).Round(time.Second).String()
				}
				if sv.Connecting {
					next = "connecting"
				}
				note := cmp.Or(sv.Hint, sv.Error)
				if sv.RateLimited {
					// The server asked for time; the attempt did not count.
					note = reconnect.ReasonRateLimited
					switch {
					case sv.Connecting:
					case sv.NextAttempt.After(now):
						note += "; next try in " + sv.NextAttempt.Sub(now).Round(time.Second).String()
					default:
						note += "; next try due"
					}
				}
				if note == "" && !sv.LastReconnect.IsZero() {
					note = "reconnected " + ago(now, sv.LastReconnect)
				}
				attempts := ""
				if sv.Attempts > 0 {
					attempts = fmt.Sprint(sv.Attempts)
				}
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\n", esc(sv.Name), esc(sv.Status), attempts, esc(sv.Tier), next, oneLine(note))
			}
		}
	}
	if d := st.Daemon; d != nil {
		if len(st.Servers) > 0 {
			fmt.Fprintln(tw)
		}
		cost := fmt.Sprintf("%d goroutines", d.Goroutines)
		if d.RSS > 0 {
			cost = fmt.Sprintf("%s resident (peak %s), %s", mib(d.RSS), mib(d.PeakRSS), cost)
		}
		fmt.Fprintf(tw, "daemon pid %d: %s\n", d.PID, cost)
	}
	return tw.Flush()
}

// mib renders a byte count in MiB.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// writeProcesses shows the MCP process view of a local OpenCode: its pid
// and children, then each duplicate with its masked command (the daemon
// masks it; it is escaped here all the same, as a command line is
// anyone's text).
func writeProcesses(w io.Writer, p *procview.Status) {
	if p == nil {
		return
	}
	esc := termsafe.Line
	children := "children"
	if p.Children == 1 {
		children = "child"
	}
	fmt.Fprintf(w, "  processes: OpenCode pid %d, %d MCP %s\n", p.OpenCodePID, p.Children, children)
	for _, s := range p.Servers {
		fmt.Fprintf(w, "  %s: %s  pid %d  %s", esc(s.Directory), esc(s.Server), s.PID, esc(s.Command))
		switch {
		case s.InContainer:
			fmt.Fprintf(w, "  (%s; the server runs in a container)", esc(s.Launcher))
		case s.ServerPID != 0:
			fmt.Fprintf(w, "  (%s) → pid %d  %s", esc(s.Launcher), s.ServerPID, esc(s.ServerCommand))
		case s.Launcher != "":
			fmt.Fprintf(w, "  (%s)", esc(s.Launcher))
		}
		if s.LauncherRunsOn {
			fmt.Fprint(w, "  [its launcher can outlive the server: a crash below it is seen when the launcher ends]")
		}
		fmt.Fprintln(w)
	}
	for _, d := range p.Duplicates {
		fmt.Fprintf(w, "  duplicate %s: %s  pids %s  %s\n", esc(d.Directory), esc(d.Server), join(d.PIDs, strconv.Itoa), esc(d.Command))
	}
	// Leftover processes are doctor's: a search of the whole process
	// table, on demand.
	fmt.Fprintln(w, "  MCP processes an OpenCode left behind: mcp-reconnect doctor finds them")
}

// join is each of xs as str makes it, comma-separated.
func join[T any](xs []T, str func(T) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = str(x)
	}
	return strings.Join(s, ", ")
}

func ago(now, t time.Time) string {
	return now.Sub(t).Round(time.Second).String() + " ago"
}

// oneLine is s escaped (termsafe.Line) and cut to 80 characters.
func oneLine(s string) string {
	s = termsafe.Line(strings.TrimSpace(s))
	if utf8.RuneCountInString(s) > 80 {
		s = string([]rune(s)[:80]) + "…"
	}
	return s
}
