package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(t *testing.T, s string) []Event {
	t.Helper()
	r := NewReader(strings.NewReader(s))
	var out []Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
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
	if got[1].Name != "x" || got[1].ID != "7" || string(got[1].Data) != "a\nb" {
		t.Errorf("event 1 = %+v", got[1])
	}
	if string(got[2].Data) != "no-space" {
		t.Errorf("event 2 data = %q", got[2].Data)
	}
}

func TestReaderRejectsHugeFrame(t *testing.T) {
	in := "data: " + strings.Repeat("x", MaxFrame+10) + "\n\n"
	_, err := NewReader(strings.NewReader(in)).Next()
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
}

func TestWriteRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, "reconnected", []byte("line1\nline2")); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, buf.String())
	if len(got) != 1 || got[0].Name != "reconnected" || string(got[0].Data) != "line1\nline2" {
		t.Fatalf("round trip = %+v", got)
	}
	if Write(&buf, "bad\nname", nil) == nil {
		t.Fatal("a name with a newline must be refused")
	}
}

func FuzzReader(f *testing.F) {
	f.Add("data: {}\n\n")
	f.Add("event: a\r\ndata: b\r\n\r\n")
	f.Add(": c\n\ndata\n\nid: \x00\ndata: x\r\r")
	f.Fuzz(func(t *testing.T, in string) {
		r := NewReader(strings.NewReader(in))
		for range 10000 {
			ev, err := r.Next()
			if err != nil {
				return
			}
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
