package sse

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
)

func readAll(t *testing.T, s string) []Event {
	t.Helper()
	out, err := collect(NewReader(strings.NewReader(s)))
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return out
}

// collect reads events until the end of the stream.
func collect(r *Reader) ([]Event, error) {
	var out []Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestReaderOpenCodeFrames(t *testing.T) {
	in := "data: {\"payload\":{\"type\":\"server.connected\"}}\n\n" +
		": keep-alive\n\n" +
		"event: x\r\nid: 7\r\ndata: a\r\ndata: b\r\n\r\n" +
		"data:no-space\r\r" +
		"data: cut off at the end"
	got := readAll(t, in)
	if len(got) != 3 {
		t.Fatalf("got %d events, want 3: %+v", len(got), got)
	}
	if string(got[0].Data) != `{"payload":{"type":"server.connected"}}` {
		t.Errorf("event 0 data = %q", got[0].Data)
	}
	if string(got[1].Data) != "a\nb" {
		t.Errorf("event 1 = %+v", got[1])
	}
	if string(got[2].Data) != "no-space" {
		t.Errorf("event 2 data = %q", got[2].Data)
	}
}

// Lines may end with CR, LF or CRLF, mixed in one stream and one event, and
// a CRLF may be split across two reads.
func TestReaderMixedLineEnds(t *testing.T) {
	in := "event: one\rdata: a\ndata: b\r\ndata:  c\r\r" +
		"data\n\n" +
		"id: 1\r\nid: \x00\ndata: d\r\n\n" +
		"field-without-colon\rretry: 5\ndata: e\r\r\n"
	want := []Event{
		{Data: []byte("a\nb\n c")},
		{Data: []byte("")},
		{Data: []byte("d")},
		{Data: []byte("e")},
	}
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(in),
		"one byte": iotest.OneByteReader(strings.NewReader(in)),
		"halves":   iotest.HalfReader(strings.NewReader(in)),
	} {
		got, err := collect(NewReader(r))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !sameEvents(got, want) {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}

func sameEvents(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

// Rule 10: an event over the limit is skipped to its end; the stream and
// every event after it, in the same read, are kept: Next never ends the
// subscription with ErrFrameTooLarge.
func TestOversizedEventKeepsStream(t *testing.T) {
	huge := strings.Repeat("x", MaxFrame/2)
	for name, big := range map[string]string{
		"one data line":     "data: " + strings.Repeat("x", MaxFrame+1) + "\n\n",
		"many data lines":   "data: " + huge + "\ndata: " + huge + "\ndata: x\n\n",
		"exactly one over":  "data: " + strings.Repeat("x", MaxFrame-1) + "\ndata: x\n\n",
		"crlf, name after":  "data: " + strings.Repeat("x", MaxFrame+1) + "\r\nevent: big\r\n\r\n",
		"cr only":           "data: " + strings.Repeat("x", MaxFrame+1) + "\r\r",
		"over, then no end": "data: " + strings.Repeat("x", MaxFrame+1) + "\ndata: y\n",
	} {
		in := "data: before\n\n" + big + "event: after\ndata: kept\n\n"
		r := NewReader(strings.NewReader(in))
		var sizes []int64
		r.OnSkip = func(sk Skipped) { sizes = append(sizes, sk.Size) }
		got, err := collect(r)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if name == "over, then no end" {
			// The blank line that ends "after" ends the big event too.
			if len(got) != 1 || r.Skipped != 1 {
				t.Errorf("%s: got %d events, %d skipped", name, len(got), r.Skipped)
			}
			continue
		}
		if len(got) != 2 || string(got[0].Data) != "before" || string(got[1].Data) != "kept" {
			t.Errorf("%s: got %d events %.40q", name, len(got), got)
		}
		// A CRLF's LF is read with the next event.
		if r.Skipped != 1 || len(sizes) != 1 || sizes[0] < int64(len(big))-1 || sizes[0] > int64(len(big)) {
			t.Errorf("%s: skipped %d, sizes %v, want one of %d bytes", name, r.Skipped, sizes, len(big))
		}
	}
}

// A comment or another field than data (event, id, unknown) of any
// length, inside an event, is passed over without costing that event.
func TestHugeCommentKeepsEvent(t *testing.T) {
	long := strings.Repeat("c", 2*MaxFrame)
	r := NewReader(strings.NewReader("data: a\n:" + long + "\r\nx-unknown: " + long + "\revent: " + long + "\nid: " + long + "\rdata: b\n\n"))
	got, err := collect(r)
	if err != nil || len(got) != 1 || string(got[0].Data) != "a\nb" || r.Skipped != 0 {
		t.Fatalf("got %.20q, %v, %d skipped", got, err, r.Skipped)
	}
}

// An event of exactly MaxFrame bytes of data is delivered.
func TestEventAtLimitIsKept(t *testing.T) {
	data := strings.Repeat("x", MaxFrame-2)
	got := readAll(t, "data: "+data[:MaxFrame/2]+"\ndata: "+data[MaxFrame/2:]+"x\n\n")
	if len(got) != 1 || len(got[0].Data) != MaxFrame {
		t.Fatalf("got %d events", len(got))
	}
}

// endless yields n bytes: prefix, then fill bytes, then suffix.
type endless struct {
	prefix, suffix string
	fill           byte
	n, off         int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.off >= e.n {
		return 0, io.EOF
	}
	var k int
	switch tail := e.n - len(e.suffix); {
	case e.off < len(e.prefix):
		k = copy(p, e.prefix[e.off:])
	case e.off >= tail:
		k = copy(p, e.suffix[e.off-tail:])
	default:
		k = min(len(p), tail-e.off)
		for i := range k {
			p[i] = e.fill
		}
	}
	e.off += k
	return k, nil
}

// However long a line or an event is, the reader holds at most the limit
// plus its read buffer; a comment or an unknown field is not held at all.
func TestOversizedEventBoundedMemory(t *testing.T) {
	const streamed = 16 << 20
	for _, tc := range []struct {
		name, prefix string
		limit        uint64
	}{
		// The data buffer grows by doubling up to the limit: about 2 MiB
		// allocated in all, never the 16 MiB streamed.
		{"data", "data: ", 3 * MaxFrame},
		{"comment", ": ", 4 * bufSize},
		{"unknown field", "xyzzy: ", 4 * bufSize},
		{"no colon", "dataaaaa", 4 * bufSize},
		{"event name", "event: ", 4 * bufSize},
		{"id", "id: ", 4 * bufSize},
	} {
		src := &endless{prefix: tc.prefix, suffix: "\n\ndata: after\n\n", fill: 'x', n: streamed}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := NewReader(src)
		ev, err := r.Next()
		runtime.ReadMemStats(&after)
		if err != nil || string(ev.Data) != "after" {
			t.Fatalf("%s: Next = %q, %v", tc.name, ev.Data, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > tc.limit {
			t.Errorf("%s: reading a %d MiB line allocated %d bytes, want at most %d", tc.name, streamed>>20, got, tc.limit)
		}
	}
}

// An event whose lines end with CR alone is dispatched at once: the reader
// must not wait for the next byte to learn whether an LF follows.
func TestCREndedEventNotDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		go func() { _, _ = io.WriteString(pw, "data: x\r\r") }()
		got := make(chan Event, 1)
		go func() {
			ev, err := NewReader(pr).Next()
			if err == nil {
				got <- ev
			}
			close(got)
		}()
		synctest.Wait()
		select {
		case ev := <-got:
			if string(ev.Data) != "x" {
				t.Fatalf("data = %q", ev.Data)
			}
		default:
			t.Fatal("the event waits for a byte after its CR")
		}
		pw.Close()
		<-got
	})
}

// Many CR-ended lines in one read cost time in proportion to their length.
func TestManyCRLinesNotQuadratic(t *testing.T) {
	in := strings.Repeat(":\r", 1<<20) + "data: x\r\r"
	got := readAll(t, in)
	if len(got) != 1 {
		t.Fatalf("got %d events", len(got))
	}
}

func TestWriteRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, "reconnected", []byte("line1\nline2")); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, buf.String())
	if len(got) != 1 || string(got[0].Data) != "line1\nline2" || !strings.HasPrefix(buf.String(), "event: reconnected\n") {
		t.Fatalf("round trip = %+v", got)
	}
	if Write(&buf, "bad\nname", nil) == nil {
		t.Fatal("a name with a newline must be refused")
	}
}

// reference reads a whole stream the simplest way the specification allows,
// with the same limits, to check Reader against.
func reference(in string) (events []Event, skipped int64) {
	var lines []string
	for len(in) > 0 {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			break // an unterminated last line is never processed
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	var data []string
	var hasData bool
	for _, line := range lines {
		if line == "" {
			d := strings.Join(data, "\n")
			switch {
			case len(d) > MaxFrame:
				skipped++
			case hasData:
				events = append(events, Event{Data: []byte(d)})
			}
			data, hasData = nil, false
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		if field == "data" {
			data, hasData = append(data, value), true
		}
	}
	return events, skipped
}

func FuzzReader(f *testing.F) {
	f.Add("data: {}\n\n")
	f.Add("event: a\r\ndata: b\r\n\r\n")
	f.Add(": c\n\ndata\n\nid: \x00\ndata: x\r\r")
	f.Add("data: a\rdata: b\r\ndata\n\r\n")
	f.Add("id: 1\nid: \x002\ndata: x\n\n")
	f.Add("event:x\nevent\ndata: y\r\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		want, wantSkipped := reference(in)
		for name, src := range map[string]io.Reader{
			"whole":    strings.NewReader(in),
			"one byte": iotest.OneByteReader(strings.NewReader(in)),
		} {
			r := NewReader(src)
			got, err := collect(r)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !sameEvents(got, want) || r.Skipped != wantSkipped {
				t.Fatalf("%s: got %q (%d skipped), reference %q (%d)", name, got, r.Skipped, want, wantSkipped)
			}
		}
		for _, ev := range want {
			if len(ev.Data) > MaxFrame {
				t.Fatalf("data of %d bytes passed the limit", len(ev.Data))
			}
			// What Write emits, Next reads back unchanged.
			var buf bytes.Buffer
			if Write(&buf, "", ev.Data) == nil {
				back, err := NewReader(&buf).Next()
				want := strings.ReplaceAll(string(ev.Data), "\r\n", "\n")
				if err == nil && !strings.ContainsRune(want, '\r') && string(back.Data) != want {
					t.Fatalf("round trip %q -> %q", want, back.Data)
				}
			}
		}
	})
}

// A skipped event hands over the start of its data (the fields a server
// puts first), at most MaxHead bytes, and nothing of a previous event.
func TestOversizedEventKeepsItsHead(t *testing.T) {
	body := `{"directory":"/p","payload":{"type":"message.part.updated","properties":{"text":"` + strings.Repeat("x", MaxFrame) + `"}}}`
	in := "data: small\n\n" + "data: " + body + "\n\n" + "data: " + strings.Repeat("y", 10) + "\ndata: " + strings.Repeat("z", MaxFrame) + "\n\n"
	r := NewReader(strings.NewReader(in))
	var heads []string
	r.OnSkip = func(sk Skipped) { heads = append(heads, string(sk.Head)) }
	if _, err := collect(r); err != nil {
		t.Fatal(err)
	}
	if len(heads) != 2 {
		t.Fatalf("skipped %d events, want 2", len(heads))
	}
	if len(heads[0]) != MaxHead || !strings.HasPrefix(body, heads[0]) {
		t.Errorf("head of the big event = %d bytes %.60q, want the first %d bytes of its data", len(heads[0]), heads[0], MaxHead)
	}
	if want := strings.Repeat("y", 10) + "\n" + strings.Repeat("z", MaxHead-11); heads[1] != want {
		t.Errorf("head of an event over the limit on its second line = %.60q…, want its first line, and the second's start", heads[1])
	}
}
