package statusapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"iter"

	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// writeStatus writes GET /status's body as writeJSON would write st with
// servers and their directories in it, byte for byte, but one directory
// at a time: at a thousand armed directories the whole body is
// megabytes, and the daemon holds one directory's part of it at once,
// not the body and a copy of every directory.
func writeStatus(w *bufio.Writer, st Status, servers []OpenCodeStatus, dirs []iter.Seq[reconnect.DirSnapshot]) error {
	head, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	err = withLast(w, head, "", field{"servers", func() error {
		if len(servers) == 0 {
			_, err := w.WriteString("[]")
			return err
		}
		sep := "["
		for i, ss := range servers {
			w.WriteString(sep + "\n    ")
			sep = ","
			// OpenCodeStatus as its struct encodes: the snapshot's fields,
			// directories last of them, then the service.
			obj, err := json.MarshalIndent(ss.Snapshot, "    ", "  ")
			if err != nil {
				return err
			}
			fields := []field{{"directories", func() error { return writeDirs(w, dirs[i]) }}}
			if ss.Service != nil {
				svc, err := json.MarshalIndent(ss.Service, "      ", "  ")
				if err != nil {
					return err
				}
				fields = append(fields, field{"service", func() error { _, err := w.Write(svc); return err }})
			}
			if err := withLast(w, obj, "    ", fields...); err != nil {
				return err
			}
		}
		_, err := w.WriteString("\n  ]")
		return err
	}})
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
	sep := "["
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent(indent, "  ")
	for d := range dirs {
		buf.Reset()
		if err := enc.Encode(d); err != nil {
			return err
		}
		w.WriteString(sep + "\n" + indent)
		w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		sep = ","
	}
	if sep == "[" { // none
		_, err := w.WriteString("[]")
		return err
	}
	_, err := w.WriteString("\n      ]")
	return err
}

// field is one field withLast writes: its key, and what writes its value.
type field struct {
	key   string
	value func() error
}

// withLast writes obj, an indented JSON object at indent, with fields
// after its own.
func withLast(w *bufio.Writer, obj []byte, indent string, fields ...field) error {
	end := "\n" + indent + "}"
	w.Write(bytes.TrimSuffix(obj, []byte(end)))
	for _, f := range fields {
		w.WriteString(",\n" + indent + "  \"" + f.key + "\": ")
		if err := f.value(); err != nil {
			return err
		}
	}
	_, err := w.WriteString(end)
	return err
}
