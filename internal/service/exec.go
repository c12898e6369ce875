package service

import (
	"context"
	"os/exec"
	"time"
)

// Runner runs a service manager command (systemctl) and returns
// its combined output.
type Runner interface {
	Run(ctx context.Context, argv []string) ([]byte, error)
}

// ExecRunner runs commands found on $PATH, each for at most a minute.
type ExecRunner struct{}

// Run runs argv.
func (ExecRunner) Run(ctx context.Context, argv []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
}
