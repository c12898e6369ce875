package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
)

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func absDir(d string) (string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("--directory %q: %w", d, err)
	}
	return abs, nil
}
