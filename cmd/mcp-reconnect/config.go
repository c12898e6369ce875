package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"
)

// defaultConfigPath is config.toml in the user's config directory.
func defaultConfigPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "mcp-reconnect", "config.toml")
}

// defaultLogPath is where `run` logs: the TUI owns the terminal.
func defaultLogPath() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(os.TempDir(), "mcp-reconnect.log")
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "mcp-reconnect", "mcp-reconnect.log")
}

// applyConfigFile sets every flag not set yet (by the command line or the
// environment) from the TOML file at path. A missing file is fine unless
// it was asked for by name. Errors name the file and the key.
func applyConfigFile(fset *pflag.FlagSet, path string, explicit bool) error {
	if path == "" {
		return nil
	}
	var data map[string]any
	_, err := toml.DecodeFile(path, &data)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if key == "config" {
			return fmt.Errorf("config file %s: key %q: a config file cannot name another", path, key)
		}
		f := fset.Lookup(key)
		if f == nil {
			if sharedKeys[key] {
				continue // a key for another command (watch's, read by status)
			}
			return fmt.Errorf("config file %s: unknown key %q (keys are the flag names, e.g. initial-delay)", path, key)
		}
		if f.Changed {
			continue
		}
		values := []any{data[key]}
		if list, ok := data[key].([]any); ok {
			if f.Value.Type() != "stringArray" {
				return fmt.Errorf("config file %s: key %q takes one value, not a list", path, key)
			}
			values = list
		}
		for _, v := range values {
			s := fmt.Sprint(v)
			if _, isMap := v.(map[string]any); isMap {
				return fmt.Errorf("config file %s: key %q: a table is not a value", path, key)
			}
			if err := f.Value.Set(s); err != nil {
				shown := s
				if key == "password" {
					shown = "(hidden)"
				}
				return fmt.Errorf("config file %s: key %q = %q: %w", path, key, shown, err)
			}
		}
	}
	return nil
}

// sharedKeys are the keys of watch and run; commands with fewer flags
// (status, reconnect, doctor) skip them instead of calling them unknown.
var sharedKeys = func() map[string]bool {
	var f watchFlags
	fs := pflag.NewFlagSet("keys", pflag.ContinueOnError)
	f.register(fs)
	keys := map[string]bool{"start-timeout": true} // run's own
	fs.VisitAll(func(fl *pflag.Flag) { keys[fl.Name] = true })
	return keys
}()

// logger opens the log destination: stderr, or --log-file created 0600 in
// a 0700 directory.
func (f *watchFlags) logger(stderr io.Writer) (*slog.Logger, func(), error) {
	w, closeFn := stderr, func() {}
	if f.logFile != "" && f.logFile != "-" {
		if err := os.MkdirAll(filepath.Dir(f.logFile), 0o700); err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		file, err := os.OpenFile(f.logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		w, closeFn = file, func() { _ = file.Close() }
	}
	log, err := newLogger(w, f.logLevel, f.logFormat)
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return log, closeFn, nil
}
