package statusapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"iter"

	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// writeStatus writes GET /status's body as writeJSON would write st with
// servers and their directories in it (the fields of an object in their
// order, servers and directories last), but one directory at a time:
// at a thousand armed directories the whole body is megabytes, and the
// daemon holds one directory's part of it at once, not the body and a
// copy of every directory.
func writeStatus(w *bufio.Writer, st Status, servers []ServerStatus, dirs []iter.Seq[reconnect.DirSnapshot]) error {
	head, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	err = withLast(w, head, "", "servers", func() error {
		if len(servers) == 0 {
			_, err := w.WriteString("[]")
			return err
		}
		w.WriteString("[")
		for i, ss := range servers {
			if i > 0 {
				w.WriteString(",")
			}
			w.WriteString("\n    ")
			obj, err := json.MarshalIndent(ss, "    ", "  ")
			if err != nil {
				return err
			}
			if err := withLast(w, obj, "    ", "directories", func() error { return writeDirs(w, dirs[i]) }); err != nil {
				return err
			}
		}
		_, err := w.WriteString("\n  ]")
		return err
	})
	if err != nil {
		return err
	}
	_, err = w.WriteString("\n")
	return err
}

// writeDirs writes one server's directories, as the array they make at
// its depth in the body.
func writeDirs(w *bufio.Writer, dirs iter.Seq[reconnect.DirSnapshot]) error {
	const indent = "        "
	n := 0
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent(indent, "  ")
	for d := range dirs {
		buf.Reset()
		if err := enc.Encode(d); err != nil {
			return err
		}
		if n == 0 {
			w.WriteString("[")
		} else {
			w.WriteString(",")
		}
		w.WriteString("\n" + indent)
		w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		n++
	}
	if n == 0 {
		_, err := w.WriteString("[]")
		return err
	}
	_, err := w.WriteString("\n      ]")
	return err
}

// withLast writes obj, an indented JSON object at indent, with one more
// field last: key, whose value value writes.
func withLast(w *bufio.Writer, obj []byte, indent, key string, value func() error) error {
	end := "\n" + indent + "}"
	obj = bytes.TrimSuffix(obj, []byte(end))
	w.Write(obj)
	w.WriteString(",\n" + indent + "  \"" + key + "\": ")
	if err := value(); err != nil {
		return err
	}
	_, err := w.WriteString(end)
	return err
}
