package service

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
)

// EnvFileFlag is the watch flag with which the systemd unit names its
// environment file, so that the daemon checks the file its environment
// came from (CheckEnvFileAt). A flag, not a variable: a variable set by
// Environment= is overridden by the very file it would name, and flags
// win over the environment.
const EnvFileFlag = "service-env-file"

// CheckEnvFileAt checks the environment file at p as systemd hands it to
// the daemon, with the config file's rules (cmd/mcp-reconnect/config.go):
// refused (err) when it is another user's (private.Mine: its owner can
// change it whenever they like) or group or others may write it (either
// could set OPENCODE_URL, and the password goes there, or
// MCP_RECONNECT_DIRECTORY, and a directory of theirs is armed: OpenCode
// runs the commands its config names, as you), or when it holds a
// password (OPENCODE_SERVER_PASSWORD and the like) and others may read
// it; a warning when others may read one that holds no password. A
// missing file is fine (the unit's "-" prefix): "", nil. Neither message
// quotes the file.
func CheckEnvFileAt(p string) (warning string, err error) {
	// Whoever can change it changes the OpenCode URL the password is
	// sent to and the directories armed.
	f, fi, err := private.Trust{UID: -1, Readable: true}.Open("environment file", p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	perm := fi.Mode().Perm()
	if perm&0o044 == 0 {
		return "", nil
	}
	pw, err := holdsPassword(io.LimitReader(f, 1<<20))
	if err != nil {
		return "", fmt.Errorf("environment file %s: %w", p, err)
	}
	if pw != "" {
		return "", fmt.Errorf("environment file %s holds a password (%s) but other users can read it (mode %04o); run: chmod 600 %s", p, pw, perm, p)
	}
	return fmt.Sprintf("environment file %s: other users can read it (mode %04o); it holds no password, but a password put there later would be readable too; run: chmod 600 %s", p, perm, p), nil
}

// holdsPassword names the first variable of a systemd environment file
// (KEY=VALUE lines, # and ; comments) that holds a password: one whose
// name says PASSWORD, other than MCP_RECONNECT_PASSWORD_FILE (a path).
func holdsPassword(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok {
			continue
		}
		name := strings.TrimSpace(strings.TrimPrefix(string(k), "export "))
		if strings.Contains(strings.ToUpper(name), "PASSWORD") && name != "MCP_RECONNECT_PASSWORD_FILE" && len(bytes.TrimSpace(v)) > 0 {
			return name, nil
		}
	}
	return "", sc.Err()
}

// envFileState is the environment file as status shows it: "absent",
// "private", or what is wrong with it.
func envFileState(p string) string {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	warning, err := CheckEnvFileAt(p)
	switch {
	case err != nil:
		return "refused by the service: " + err.Error()
	case warning != "":
		return warning
	}
	return "private"
}
