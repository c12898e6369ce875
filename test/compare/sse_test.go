package compare

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	r3sse "github.com/r3labs/sse/v2"
	gosse "github.com/tmaxmax/go-sse"

	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

// limit is what the libraries are given as their largest event, so that
// they accept every event sse.Reader delivers (MaxFrame of data, plus the
// field names and line ends). Their default, 64 KiB in both, ends the
// stream at the first 200 KB message.part.updated.
const limit = sse.MaxFrame + 64<<10

// unbounded is a limit no event here reaches: what a library does when
// told to take any event.
const unbounded = 64 << 20

// read is what a stream reader delivered.
type read struct {
	events  int      // events with data delivered
	bytes   int      // their data, in all
	skipped int64    // events skipped for their size (sse.Reader only)
	last    [48]byte // the start of the last event's data
	err     error    // what ended the stream early; nil at a clean end
}

// add counts an event. It takes a string or bytes, so that no reader pays
// for a conversion, and copies nothing but the start.
func add[T string | []byte](r *read, data T) {
	r.events++
	r.bytes += len(data)
	r.last = [48]byte{}
	copy(r.last[:], data)
}

type reader struct {
	name string
	read func(io.Reader) read
}

var (
	ours = reader{"sse.Reader", func(in io.Reader) (res read) {
		r := sse.NewReader(in)
		r.OnSkip = func(sse.Skipped) { res.skipped++ }
		for {
			ev, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					res.err = err
				}
				return res
			}
			add(&res, ev.Data)
		}
	}}
	goSSE         = reader{"go-sse", func(in io.Reader) read { return readGoSSE(in, limit) }}
	goSSEUnbound  = reader{"go-sse-unbounded", func(in io.Reader) read { return readGoSSE(in, unbounded) }}
	r3labs        = reader{"r3labs", func(in io.Reader) read { return readR3labs(in, limit) }}
	r3labsUnbound = reader{"r3labs-unbounded", func(in io.Reader) read { return readR3labs(in, unbounded) }}
)

// readGoSSE reads with go-sse's Read, its parser without the client.
func readGoSSE(in io.Reader, max int) (res read) {
	for ev, err := range gosse.Read(in, &gosse.ReadConfig{MaxEventSize: max}) {
		if err != nil {
			res.err = err
			return res
		}
		if ev.Data != "" {
			add(&res, ev.Data)
		}
	}
	return res
}

// readR3labs reads with r3labs' EventStreamReader. It hands over each
// event's raw text; the field parsing that its Client does with it is not
// exported, so the least a caller must do is done here: take the data
// lines (one, for OpenCode), without copying.
func readR3labs(in io.Reader, max int) (res read) {
	r := r3sse.NewEventStreamReader(in, max)
	for {
		raw, err := r.ReadEvent()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				res.err = err
			}
			return res
		}
		if data, ok := dataOf(raw); ok {
			add(&res, data)
		}
	}
}

// dataOf is the data lines of a raw event, joined with newlines.
func dataOf(raw []byte) ([]byte, bool) {
	var data []byte
	n := 0
	for line := range bytes.Lines(raw) {
		line = bytes.TrimRight(line, "\r\n")
		v, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		v, _ = bytes.CutPrefix(v, []byte(" "))
		if n++; n == 1 {
			data = v
		} else {
			data = append(append(bytes.Clone(data), '\n'), v...)
		}
	}
	return data, n > 0
}

// chunk is the most one Read hands a reader: an HTTP body is read from a
// socket in pieces. How big they are depends on the sender and the
// socket, so the 200 KB stream is read in pieces of 64 KiB too: readers
// that scan their whole buffer again for each piece depend on it.
const chunk = 16 << 10

type streamCase struct {
	name    string
	data    []byte
	chunk   int
	readers []reader
}

var streams = []streamCase{
	{"small-1000", smallStream, chunk, []reader{ours, goSSE, r3labs}},
	{"part.updated-200KBx10", bigStream, chunk, []reader{ours, goSSE, r3labs}},
	{"part.updated-200KBx10-64KiB-reads", bigStream, 64 << 10, []reader{ours, goSSE, r3labs}},
	{"oversized-2MB", oversizedStream, chunk, []reader{ours, goSSE, goSSEUnbound, r3labs, r3labsUnbound}},
}

func BenchmarkReadStream(b *testing.B) {
	for _, sc := range streams {
		for _, rd := range sc.readers {
			b.Run("stream="+sc.name+"/reader="+rd.name, func(b *testing.B) {
				b.SetBytes(int64(len(sc.data)))
				b.ReportAllocs()
				var res read
				for b.Loop() {
					res = rd.read(newChunked(sc.data, sc.chunk))
				}
				b.ReportMetric(float64(res.events), "events")
			})
		}
	}
}

// What each reader makes of each stream: every reader delivers every
// event of the first two streams, the same bytes; of the third, sse.Reader
// skips the 2 MB event and delivers the 20 around it, while the libraries
// with the same limit end the stream at it, and without a limit hold it
// whole. The test logs the bytes each allocated for the stream.
func TestReadersOnTheStreams(t *testing.T) {
	want := map[string]read{}
	for _, sc := range streams[:3] {
		want[sc.name] = ours.read(newChunked(sc.data, sc.chunk))
	}
	if w := want["small-1000"]; w.events != 1000 || w.err != nil {
		t.Fatalf("sse.Reader on small-1000: %+v", w)
	}
	if w := want["part.updated-200KBx10"]; w.events != 11 || w.err != nil {
		t.Fatalf("sse.Reader on part.updated-200KBx10: %+v", w)
	}
	for _, sc := range streams {
		for _, rd := range sc.readers {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			got := rd.read(newChunked(sc.data, sc.chunk))
			runtime.ReadMemStats(&after)
			t.Logf("%-33s %-17s events %4d, skipped %d, error %v, allocated %7.2f MiB for a %.2f MiB stream",
				sc.name, rd.name, got.events, got.skipped, got.err,
				float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), float64(len(sc.data))/(1<<20))
			if sc.name != "oversized-2MB" {
				if w := want[sc.name]; got.events != w.events || got.bytes != w.bytes || got.err != nil {
					t.Errorf("%s on %s: %d events, %d bytes, %v; sse.Reader: %d, %d", rd.name, sc.name, got.events, got.bytes, got.err, w.events, w.bytes)
				}
				continue
			}
			switch rd.name {
			case "sse.Reader":
				if got.events != 20 || got.skipped != 1 || got.err != nil || !bytes.Equal(got.last[:], toolsChanged[:48]) {
					t.Errorf("sse.Reader on the 2 MB stream: %+v", got)
				}
			case "go-sse", "r3labs":
				// The stream ends at the big event: the 10 events after it,
				// the crash report among them, are lost.
				if got.events != 10 || !errors.Is(got.err, bufioErrTooLong) {
					t.Errorf("%s on the 2 MB stream: %d events, %v", rd.name, got.events, got.err)
				}
			default:
				if got.events != 21 || got.err != nil {
					t.Errorf("%s on the 2 MB stream: %d events, %v", rd.name, got.events, got.err)
				}
			}
		}
	}
}

// bufioErrTooLong is what both libraries return for an event over their
// limit: bufio.Scanner's error, passed through.
var bufioErrTooLong = bufio.ErrTooLong
