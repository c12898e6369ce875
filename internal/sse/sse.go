// Package sse reads and writes Server-Sent Events frames
// (https://html.spec.whatwg.org/multipage/server-sent-events.html). It is
// small on purpose: the daemon reads OpenCode's /global/event, whose
// events it tells apart by their data alone, and serves its own /events,
// named by the event's type. The reader keeps the data field; every other
// field (event, id, retry) is passed over, as a comment is.
package sse

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// MaxFrame bounds one event's data so a misbehaving server cannot make the
// daemon buffer without limit. A larger event is skipped, not fatal:
// OpenCode sends the whole text of a message part in every update, so a
// tool that read a large file produces one, and the events behind it (a
// crash report) must still be seen.
const MaxFrame = 1 << 20

// MaxHead is how much of a skipped event's data is kept for OnSkip: enough
// for the fields a server puts first (OpenCode 1.x: the directory, then the
// payload's type), never the whole event.
const MaxHead = 16 << 10

// Skipped describes an event skipped for being over a limit.
type Skipped struct {
	// Size is the bytes the event took in the stream.
	Size int64
	// Head is the start of its data, at most MaxHead bytes.
	Head []byte
}

// bufSize is the read buffer. A Reader holds at most MaxFrame + MaxHead +
// bufSize bytes, however long a line or an event is.
const bufSize = 64 << 10

// Event is one dispatched frame.
type Event struct {
	// Data is the "data:" lines joined with newlines.
	Data []byte
}

// Reader splits a stream into events. It reads the stream in chunks, not
// byte by byte, and buffers only the fields it keeps: a comment or an
// unknown field costs nothing however long it is.
type Reader struct {
	r *bufio.Reader

	// OnSkip, when set, is called from Next for each event skipped for
	// being over MaxFrame. The Head it gets is valid only during the
	// call.
	OnSkip func(Skipped)
	// Skipped counts the events skipped for being over a limit.
	Skipped int64

	// The event being read.
	data      []byte
	head      []byte // the start of an oversized event's data
	hasData   bool
	oversized bool  // over the limit: read to its end, then dropped
	size      int64 // bytes of the stream this event took so far

	// The line being read.
	field   [len("data")]byte // the field name's start
	nField  int               // length of the field name so far
	inValue bool              // the colon was seen
	atValue bool              // just after the colon: a leading space is dropped
	keep    bool              // the value is data's; otherwise it is discarded
	skipLF  bool              // the last line ended with CR: an LF right after belongs to it
	noLF    int               // the buffered bytes hold no LF before this offset
}

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, bufSize)}
}

// Next returns the next event that carries data. It returns io.EOF at a
// clean end of stream; an event cut off by the end is dropped, as the
// specification requires. An event over a limit is skipped (see Skipped
// and OnSkip) and reading goes on with the event after it.
func (r *Reader) Next() (Event, error) {
	for {
		buf, err := r.fill()
		if err != nil {
			return Event{}, err
		}
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.consume(1)
				continue
			}
		}
		// The line ends at the first CR or LF. Where the next LF is, is
		// remembered: searching the whole buffer again for each line of a
		// stream that ends its lines with CR alone would be quadratic.
		lf := bytes.IndexByte(buf[r.noLF:], '\n')
		if lf < 0 {
			lf = len(buf)
		} else {
			lf += r.noLF
		}
		r.noLF = lf
		end := lf
		if cr := bytes.IndexByte(buf[:lf], '\r'); cr >= 0 {
			end = cr
		}
		r.linePart(buf[:end])
		if end == len(buf) {
			r.consume(end) // the line goes on in the next chunk
			continue
		}
		r.skipLF = buf[end] == '\r'
		r.consume(end + 1)
		if ev, ok := r.endLine(); ok {
			return ev, nil
		}
	}
}

// fill returns the buffered bytes, reading when there are none.
func (r *Reader) fill() ([]byte, error) {
	if r.r.Buffered() == 0 {
		if _, err := r.r.Peek(1); err != nil {
			return nil, err
		}
	}
	return r.r.Peek(r.r.Buffered())
}

func (r *Reader) consume(n int) {
	_, _ = r.r.Discard(n)
	r.size += int64(n)
	r.noLF = max(r.noLF-n, 0)
}

// linePart takes the next piece of the current line, without terminator.
func (r *Reader) linePart(p []byte) {
	if !r.inValue {
		colon := bytes.IndexByte(p, ':')
		name := p
		if colon >= 0 {
			name = p[:colon]
		}
		if r.nField < len(r.field) {
			copy(r.field[r.nField:], name)
		}
		r.nField += len(name)
		if colon < 0 {
			return
		}
		r.inValue, r.atValue = true, true
		r.keep = r.isData()
		p = p[colon+1:]
	}
	if r.atValue && len(p) > 0 {
		r.atValue = false
		if p[0] == ' ' {
			p = p[1:]
		}
	}
	if r.keep {
		r.appendData(p)
	}
}

// isData reports whether the field whose name is complete is data, and
// starts its line of the data. It is decided once, so that only data is
// buffered.
func (r *Reader) isData() bool {
	if r.nField != len(r.field) || string(r.field[:]) != "data" {
		return false // a comment (empty name), event, id, retry, or an unknown field
	}
	if r.hasData {
		r.appendData([]byte{'\n'})
	}
	r.hasData = true
	return true
}

// appendData appends p to the event's data, unless that takes it over
// MaxFrame: then the event is marked oversized, the start of its data is
// kept for OnSkip, and the data is let go. Growth is capped at the limit,
// so the buffer's capacity never exceeds it either.
func (r *Reader) appendData(p []byte) {
	if r.oversized {
		return
	}
	need := len(r.data) + len(p)
	if need > MaxFrame {
		r.oversized = true
		r.head = append(r.head[:0], r.data[:min(len(r.data), MaxHead)]...)
		r.head = append(r.head, p[:min(len(p), MaxHead-len(r.head))]...)
		r.data = nil
		return
	}
	if need > cap(r.data) {
		grown := make([]byte, len(r.data), min(max(2*cap(r.data), need, 512), MaxFrame))
		copy(grown, r.data)
		r.data = grown
	}
	r.data = append(r.data, p...)
}

// endLine finishes a line; a blank line dispatches the event.
func (r *Reader) endLine() (Event, bool) {
	blank := r.nField == 0 && !r.inValue
	if !r.inValue && !blank {
		r.isData() // a line without a colon: the value is empty
	}
	r.nField, r.inValue, r.atValue, r.keep = 0, false, false, false
	if !blank {
		return Event{}, false
	}
	defer r.reset()
	if r.oversized {
		r.Skipped++
		if r.OnSkip != nil {
			r.OnSkip(Skipped{Size: r.size, Head: r.head})
		}
		return Event{}, false
	}
	if !r.hasData {
		return Event{}, false
	}
	return Event{Data: bytes.Clone(r.data)}, true
}

// reset starts a new event. A data buffer of ordinary size is kept for
// reuse; one grown by a large event is let go.
func (r *Reader) reset() {
	if cap(r.data) > bufSize {
		r.data = nil
	}
	r.data, r.head = r.data[:0], r.head[:0]
	r.hasData, r.oversized, r.size = false, false, 0
}

// Write writes one event to w; data may hold newlines.
func Write(w io.Writer, name string, data []byte) error {
	var b strings.Builder
	if name != "" {
		if strings.ContainsAny(name, "\r\n") {
			return fmt.Errorf("sse: event name %q holds a newline", name)
		}
		b.WriteString("event: ")
		b.WriteString(name)
		b.WriteByte('\n')
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n") {
		b.WriteString("data: ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}
