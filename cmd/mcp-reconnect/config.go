package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/BurntSushi/toml"
	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
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

// defaultLogPath is where `run` logs (the TUI owns the terminal): in
// mcp-reconnect's state directory, beside the registry.
func defaultLogPath() string {
	dir, err := private.StateDir("")
	if err != nil {
		return filepath.Join(os.TempDir(), "mcp-reconnect.log")
	}
	return filepath.Join(dir, "mcp-reconnect.log")
}

// configFile is the TOML config file, read once: its keys set flags
// (apply), its [[opencode]] tables name servers (servers).
type configFile struct {
	path string
	data map[string]any
}

// loadConfigFile reads the TOML file at path, refusing one other users
// can change (or read, when it holds a password). A missing file is nil
// unless it was asked for by name. Errors name the file.
func loadConfigFile(path string, explicit bool) (*configFile, error) {
	if path == "" {
		return nil, nil
	}
	var data map[string]any
	_, err := toml.DecodeFile(path, &data)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if err := checkConfigPerms(path, data); err != nil {
		return nil, err
	}
	return &configFile{path: path, data: data}, nil
}

// apply sets every flag not set yet (by the command line or the
// environment) from the file; errors name the file and the key.
func (c *configFile) apply(fset *pflag.FlagSet) error {
	if c == nil {
		return nil
	}
	path, data := c.path, c.data
	for _, key := range slices.Sorted(maps.Keys(data)) {
		if key == "config" {
			return fmt.Errorf("config file %s: key %q: a config file cannot name another", path, key)
		}
		if key == serversKey {
			continue // [[opencode]] tables: read by servers
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
			// fset.Set marks the flag as given, as a flag or the
			// environment would: a url or password from the file counts as
			// chosen (over the OpenCode 2 service file, for one).
			if err := fset.Set(key, s); err != nil {
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

// checkConfigPerms refuses a config file other users can change (it names
// the servers to send passwords to, password files, and directories whose
// MCP servers OpenCode will start): one another user owns, or one group
// or others may write; and one holding a password (or naming password
// files) that other users can read.
func checkConfigPerms(path string, data map[string]any) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	// A password drives the OpenCode server, which runs commands as this
	// user: a file holding one (or naming password files) is refused
	// when others can read it, as ssh refuses a private key others can
	// read. Root may own it (a file in /etc).
	_, password := data["password"]
	_, servers := data[serversKey]
	return private.Trust{UID: -1, RootMayOwn: true, Readable: !password && !servers}.Check("config file", path, fi)
}

// sharedKeys are the keys of watch and run; commands with fewer flags
// (status, reconnect, doctor) skip them instead of calling them unknown.
var sharedKeys = func() map[string]bool {
	var f watchFlags
	fs := pflag.NewFlagSet("keys", pflag.ContinueOnError)
	f.register(fs)
	f.registerOptIns(fs, true)
	keys := map[string]bool{"start-timeout": true} // run's own
	fs.VisitAll(func(fl *pflag.Flag) { keys[fl.Name] = true })
	return keys
}()

// makePrivate brings a log file that already existed with looser
// permissions to 0600 (the log names directories and servers), or refuses
// it when that cannot be done (another user's file).
func makePrivate(file *os.File) error {
	fi, err := file.Stat()
	if err != nil {
		return fmt.Errorf("--log-file %s: %w", file.Name(), err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return nil // private already, or /dev/stderr, a fifo: not a file we keep
	}
	if err := file.Chmod(0o600); err != nil {
		return fmt.Errorf("--log-file %s is readable by other users (mode %04o) and cannot be made private (%v); run: chmod 600 %s", file.Name(), fi.Mode().Perm(), err, file.Name())
	}
	return nil
}

// logsToFile reports whether --log-file names a file ("-" is stderr).
func (f *watchFlags) logsToFile() bool { return f.logFile != "" && f.logFile != "-" }

// logger opens the log destination, once --log-level and --log-format
// are known good: stderr, or --log-file created 0600 in a 0700 directory.
func (f *watchFlags) logger(stderr io.Writer) (*slog.Logger, func(), error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return nil, nil, fmt.Errorf("--log-format %q: want text or json", f.logFormat)
	}
	w, closeFn := stderr, func() {}
	if f.logsToFile() {
		if err := os.MkdirAll(filepath.Dir(f.logFile), 0o700); err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		file, err := os.OpenFile(f.logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		if err := makePrivate(file); err != nil {
			_ = file.Close()
			return nil, nil, err
		}
		w, closeFn = file, func() { _ = file.Close() }
	}
	opts := &slog.HandlerOptions{Level: level}
	if f.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), closeFn, nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), closeFn, nil
}
