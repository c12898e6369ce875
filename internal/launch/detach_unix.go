//go:build unix

package launch

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// StartDetached starts path with args and env in the background, in a
// session of its own (no controlling terminal: it outlives the terminal),
// with stdin, stdout and stderr on /dev/null, and returns its pid.
//
// Its parent is not this process: a short-lived /bin/sh starts it and
// exits at once (this process waits for the shell), so it is reparented
// to init or the nearest subreaper, which reaps it when it ends. Started
// directly, it would stay this process's child, and `run` then execs into
// OpenCode: a TUI that never waits for children it did not start, so the
// daemon would linger as a zombie once it ended, and count as running.
//
// The shell starts it with SIGINT and SIGQUIT ignored (POSIX, for a
// background command without job control); a Go program that asks for
// SIGINT with os/signal gets it back.
func StartDetached(path string, args, env []string) (int, error) {
	if _, err := exec.LookPath(path); err != nil {
		return 0, err
	}
	sh := exec.Command("/bin/sh", append([]string{"-c", `"$@" </dev/null >/dev/null 2>&1 & echo $!`, "mcp-reconnect-detach", path}, args...)...)
	sh.Env = env
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := sh.Output()
	if err != nil {
		return 0, fmt.Errorf("starting %s in the background: %w", path, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("starting %s in the background: the shell said %q, not a pid", path, truncate(string(out), 40))
	}
	return pid, nil
}
