package main

import (
	"encoding/json"
	"io"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
)

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// absDir is the directory OpenCode knows d by (daemon.PhysicalDir).
func absDir(d string) (string, error) { return daemon.PhysicalDir(d) }
