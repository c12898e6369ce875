// Package sse reads and writes Server-Sent Events frames
// (https://html.spec.whatwg.org/multipage/server-sent-events.html). It is
// small on purpose: the daemon reads OpenCode's /global/event and serves its
// own /events, and both need only the event name and data fields.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxFrame bounds one event's data so a misbehaving server cannot make the
// daemon buffer without limit.
const MaxFrame = 1 << 20

// ErrFrameTooLarge is returned when one event exceeds MaxFrame.
var ErrFrameTooLarge = errors.New("sse: event larger than 1 MiB")

// Event is one dispatched frame.
type Event struct {
	// Name is the "event:" field; empty means "message".
	Name string
	// Data is the "data:" lines joined with newlines.
	Data []byte
	// ID is the last "id:" field.
	ID string
}

// Reader splits a stream into events.
type Reader struct {
	r *bufio.Reader
}

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event that carries data. It returns io.EOF at a
// clean end of stream; an event cut off by the end is dropped, as the
// specification requires.
func (r *Reader) Next() (Event, error) {
	var ev Event
	var data bytes.Buffer
	hasData := false
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = bytes.Clone(data.Bytes())
				return ev, nil
			}
			ev = Event{}
			continue
		}
		if line[0] == ':' {
			continue // comment, used as keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if data.Len()+len(value)+1 > MaxFrame {
				return Event{}, ErrFrameTooLarge
			}
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "event":
			ev.Name = string(value)
		case "id":
			if !bytes.ContainsRune(value, 0) {
				ev.ID = string(value)
			}
		}
	}
}

// readLine returns one line without its terminator (LF, CRLF or CR).
func (r *Reader) readLine() ([]byte, error) {
	var line []byte
	for {
		b, err := r.r.ReadByte()
		if err != nil {
			return nil, err
		}
		switch b {
		case '\n':
			return line, nil
		case '\r':
			if next, err := r.r.Peek(1); err == nil && next[0] == '\n' {
				_, _ = r.r.ReadByte()
			}
			return line, nil
		}
		if len(line) >= MaxFrame {
			return nil, ErrFrameTooLarge
		}
		line = append(line, b)
	}
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
