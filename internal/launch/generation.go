package launch

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

var versionRE = regexp.MustCompile(`(\d+)\.\d+\.\d+`)

// Major runs `command --version` and returns the major version it prints:
// 1 for OpenCode 1.18.34, 2 for 2.0.21. The two generations are wrapped
// differently (a 2.x TUI attaches to a shared background service instead
// of serving itself).
func Major(ctx context.Context, command string, env []string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, command, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", command, err)
	}
	return ParseMajor(string(out))
}

// ParseMajor finds the first x.y.z version in out and returns x.
func ParseMajor(out string) (int, error) {
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no version in %q", truncate(out, 80))
	}
	return strconv.Atoi(m[1])
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Exec replaces this process with args[0] (found on PATH): the wrapper
// gets out of the way, and the command's exit code, signals and terminal
// are its own. It returns only when the command cannot be started.
func Exec(args, env []string) error {
	path, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, args, env)
}
