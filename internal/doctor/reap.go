package doctor

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/termsafe"
)

// ErrNoTerminal refuses doctor --reap with nobody to ask.
var ErrNoTerminal = errors.New("doctor --reap asks before ending each process, and standard input is not a terminal to ask on: pass --yes to end every proven orphan without asking")

// ReapOptions say how Reap asks and reports.
type ReapOptions struct {
	// Yes ends every proven orphan without asking (--yes).
	Yes bool
	// In is the terminal the answers are read from; nil when standard
	// input is not a terminal. Without it and without Yes, Reap refuses.
	In io.Reader
	// Prompt is where the questions go (standard error).
	Prompt io.Writer
	// Report is where Reap lists the processes (as FindProcesses), then
	// says what it ended and what it left, and why.
	Report io.Writer

	// reap ends one orphan: procview.Reaper.Reap unless a test says
	// otherwise (a test's recorded /proc tree names pids of this machine
	// that must never get a signal).
	reap func(procview.Reaper, context.Context, procview.Orphan) (procview.Reaped, error)
}

// Reap is doctor --reap: it lists the processes of o as FindProcesses
// does, then ends the orphans that evidence proves left over by an
// OpenCode now gone (this user's; see procview's Orphans), with what runs
// below each, asking before each one unless ro.Yes; procview.Reaper
// checks each process again right before every signal. The possibly left
// over ones are left, and said so. It refuses, before anything, with
// neither a terminal to ask on nor ro.Yes, and fails when an orphan could
// not be ended.
func Reap(ctx context.Context, o Options, ro ReapOptions) error {
	if ro.In == nil && !ro.Yes {
		return ErrNoTerminal
	}
	report := cmp.Or(ro.Report, io.Discard)
	f, checks := FindProcesses(ctx, o)
	Write(report, checks)
	reap := ro.reap
	if reap == nil {
		reap = procview.Reaper.Reap
	}
	r := procview.Reaper{Table: f.table, Scope: f.scope}
	if !ro.Yes {
		in, prompt := bufio.NewReader(ro.In), cmp.Or(ro.Prompt, io.Discard)
		r.Confirm = func(o procview.Orphan) bool {
			fmt.Fprintf(prompt, "end pid %d (%s, cwd %s)? [y/N] ", o.PID, termsafe.Line(o.Command), termsafe.Line(o.Cwd))
			line, err := in.ReadString('\n')
			if err != nil && line == "" {
				fmt.Fprintln(prompt)
			}
			answer := strings.ToLower(strings.TrimSpace(line))
			return answer == "y" || answer == "yes"
		}
	}
	if len(f.Orphans) == 0 {
		fmt.Fprintln(report, "no orphaned MCP process to end")
		return nil
	}
	failed := 0
	for _, o := range f.Orphans {
		what := fmt.Sprintf("pid %d (%s)", o.PID, termsafe.Line(o.Command))
		if !o.Evidence.Proven() {
			fmt.Fprintf(report, "left %s: possibly left over, not proven an orphan (%s), so not reaped\n", what, termsafe.Line(o.Why))
			continue
		}
		res, err := reap(r, ctx, o)
		switch {
		case errors.Is(err, procview.ErrDeclined):
			fmt.Fprintf(report, "left %s: not confirmed\n", what)
		case errors.Is(err, procview.ErrNotOrphan):
			fmt.Fprintf(report, "left %s: it is no longer provably the orphan listed (%v)\n", what, err)
		case errors.Is(err, procview.ErrGone) || err == nil && res.Signal == 0:
			fmt.Fprintf(report, "%s had already exited\n", what)
		case err != nil:
			failed++
			fmt.Fprintf(report, "could not end %s: %v\n", what, err)
		case res.Signal == syscall.SIGKILL:
			fmt.Fprintf(report, "ended %s with SIGKILL after %v (SIGTERM did not end it)\n", what, res.After.Round(time.Millisecond))
		default: // SIGTERM, the only other signal Reap sends
			fmt.Fprintf(report, "ended %s with SIGTERM after %v\n", what, res.After.Round(time.Millisecond))
		}
	}
	if failed > 0 {
		return fmt.Errorf("doctor --reap: %d of %d orphaned MCP processes could not be ended", failed, len(f.Orphans))
	}
	return nil
}
