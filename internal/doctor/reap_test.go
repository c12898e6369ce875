package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// fakeReap stands in for procview.Reaper.Reap: it asks as Reap does and
// records whom it would have signalled. The recorded tree's pids are this
// machine's too: no test may send them a real signal.
type fakeReap struct {
	ended  []int
	scopes []procview.Scope
	result map[int]error
}

func (fr *fakeReap) reap(r procview.Reaper, _ context.Context, o procview.Orphan) (procview.Reaped, error) {
	fr.scopes = append(fr.scopes, r.Scope)
	if r.Confirm != nil && !r.Confirm(o) {
		return procview.Reaped{}, fmt.Errorf("procview: pid %d: %w", o.PID, procview.ErrDeclined)
	}
	if err := fr.result[o.PID]; err != nil {
		return procview.Reaped{}, err
	}
	fr.ended = append(fr.ended, o.PID)
	return procview.Reaped{Signal: syscall.SIGTERM, After: 42 * time.Millisecond}, nil
}

// reapReport is what Reap said after listing the processes of anaOptions.
func reapReport(t *testing.T, report string) string {
	_, checks := FindProcesses(context.Background(), anaOptions(t))
	var list bytes.Buffer
	Write(&list, checks)
	if !strings.HasPrefix(report, list.String()) {
		t.Fatalf("report does not list the processes first:\n%s\nwant first\n%s", report, list.String())
	}
	return strings.TrimPrefix(report, list.String())
}

// Without a terminal and without --yes nothing is asked and nothing is
// ended: the error names --yes.
func TestReapRefusesWithoutTerminal(t *testing.T) {
	fr := &fakeReap{}
	var report bytes.Buffer
	err := Reap(context.Background(), anaOptions(t), ReapOptions{Report: &report, reap: fr.reap})
	if !errors.Is(err, ErrNoTerminal) || !strings.Contains(err.Error(), "--yes") || len(fr.scopes) != 0 || report.Len() != 0 {
		t.Fatalf("err %v, reaped %v, report %q", err, fr.scopes, report.String())
	}
}

// --yes ends every proven orphan without asking, and leaves the one whose
// parent is another user's OpenCode; the scope is this user's, with every
// live OpenCode of hers watched.
func TestReapYes(t *testing.T) {
	fr := &fakeReap{}
	var report, prompt bytes.Buffer
	err := Reap(context.Background(), anaOptions(t), ReapOptions{Yes: true, Prompt: &prompt, Report: &report, reap: fr.reap})
	if err != nil || !slices.Equal(fr.ended, []int{3000, 3001}) || prompt.Len() != 0 {
		t.Fatalf("err %v, ended %v, prompt %q", err, fr.ended, prompt.String())
	}
	for _, s := range fr.scopes {
		if s.UID != ana || !slices.Equal(s.Watched, []int{2000, 4000, 4001}) {
			t.Fatalf("scope %+v", s)
		}
	}
	want := "ended pid 3000 (node srv.js --api-key ***) with SIGTERM after 42ms\n" +
		"ended pid 3001 (python3 -m srvc --header 'Authorization: ***') with SIGTERM after 42ms\n" +
		"left pid 5001 (node srv.js --api-key ***): possibly left over, not proven an orphan (its OpenCode still runs), so not reaped\n"
	if got := reapReport(t, report.String()); got != want {
		t.Fatalf("report\n%s\nwant\n%s", got, want)
	}
}

// On a terminal each proven orphan is asked about: only a yes ends it;
// an empty answer and the end of input are no.
func TestReapAsksOnTerminal(t *testing.T) {
	for _, tc := range []struct {
		answers string
		ended   []int
	}{
		{"y\nn\n", []int{3000}},
		{"no\nYES\n", []int{3001}},
		{"\n", nil},
		{"", nil},
	} {
		fr := &fakeReap{}
		var report, prompt bytes.Buffer
		err := Reap(context.Background(), anaOptions(t), ReapOptions{In: strings.NewReader(tc.answers), Prompt: &prompt, Report: &report, reap: fr.reap})
		if err != nil || !slices.Equal(fr.ended, tc.ended) {
			t.Fatalf("answers %q: err %v, ended %v", tc.answers, err, fr.ended)
		}
		q := prompt.String()
		if !strings.HasPrefix(q, "end pid 3000 (node srv.js --api-key ***, cwd /home/ana/my projéct)? [y/N] ") ||
			!strings.Contains(q, "end pid 3001 (python3 -m srvc --header 'Authorization: ***', cwd /home/ana/other dir)? [y/N] ") || strings.Contains(q, "5001") {
			t.Fatalf("answers %q: asked %q", tc.answers, q)
		}
		if n := strings.Count(report.String(), "not confirmed"); n != 2-len(tc.ended) {
			t.Fatalf("answers %q: report %q", tc.answers, report.String())
		}
	}
}

// What Reap could not end fails it; what changed under it (no longer an
// orphan, gone) is said and is no failure.
func TestReapReportsWhatItLeft(t *testing.T) {
	fr := &fakeReap{result: map[int]error{
		3000: fmt.Errorf("procview: pid 3000 has parent 77: %w", procview.ErrNotOrphan),
		3001: errors.New("procview: pid 3001 still runs after SIGKILL"),
	}}
	var report bytes.Buffer
	err := Reap(context.Background(), anaOptions(t), ReapOptions{Yes: true, Report: &report, reap: fr.reap})
	if err == nil || !strings.Contains(err.Error(), "1 of 3") {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"left pid 3000 (node srv.js --api-key ***): it is no longer provably the orphan listed", "could not end pid 3001"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report has no %q:\n%s", want, report.String())
		}
	}
}

// Nothing to end is said so.
func TestReapNothing(t *testing.T) {
	var report bytes.Buffer
	if err := Reap(context.Background(), Options{}, ReapOptions{Yes: true, Report: &report, reap: (&fakeReap{}).reap}); err != nil || report.String() != "no orphaned MCP process to end\n" {
		t.Fatalf("err %v, report %q", err, report.String())
	}
}
