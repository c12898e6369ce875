// Package launch runs the OpenCode that `mcp-reconnect run` manages: it
// picks a loopback port and a password when the user gave none, passes the
// password through the environment (never the command line), gives the
// child the terminal, forwards signals, and reports how the child ended.
package launch

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
)

// The variables OpenCode reads its server credentials from. 1.x reads
// PasswordEnv and UsernameEnv (default user "opencode"); 2.x reads
// PasswordEnv2, then PasswordEnv, and always authenticates as "opencode".
const (
	PasswordEnv  = "OPENCODE_SERVER_PASSWORD"
	UsernameEnv  = "OPENCODE_SERVER_USERNAME"
	PasswordEnv2 = "OPENCODE_PASSWORD"
)

// DefaultUsername is OpenCode's basic-auth user when none is set (and the
// only one 2.x knows).
const DefaultUsername = "opencode"

// Credentials say how the child's server is to authenticate, and by
// which generation's rules.
type Credentials struct {
	// Password the user configured; "" takes it from the environment
	// (2.x: OPENCODE_PASSWORD, then OPENCODE_SERVER_PASSWORD; 1.x:
	// OPENCODE_SERVER_PASSWORD), and generates one when that is empty too.
	Password string
	// Username the user configured (1.x only); "" keeps the environment's
	// OPENCODE_SERVER_USERNAME, else OpenCode's default "opencode".
	Username string
	// Major is OpenCode's major version: 2 applies 2.x's rules; anything
	// else 1.x's.
	Major int
}

// Plan is what will be started: the final argument list and environment,
// and where the server will listen.
type Plan struct {
	// Path and Args are the command to run (Args[0] is the command name).
	Path string
	Args []string
	// Env is the child's environment.
	Env []string
	// URL is where the OpenCode server will answer; empty when COMMAND is
	// not OpenCode and gave no --port.
	URL string
	// Password is the server password the child gets.
	Password string
	// Username is the basic-auth user the child's server expects.
	Username string
	// GeneratedPassword is true when the daemon made the password up.
	GeneratedPassword bool
	// PortChosen is true when the wrapper picked the port (the user gave
	// none); only then may it pick another when the port was taken.
	PortChosen bool
	// Port is the port the server will listen on (0 when not a server).
	Port int
	// portAt is the index in Args of the chosen port's value.
	portAt int
}

// NewPort picks another free port for a plan whose port the wrapper
// chose, after another process took the first one.
func (p *Plan) NewPort() error {
	if !p.PortChosen {
		return errors.New("run: the port was given by the user")
	}
	free, err := loopback.FreePort()
	if err != nil {
		return fmt.Errorf("run: picking a port: %w", err)
	}
	p.Port = free
	p.Args[p.portAt] = strconv.Itoa(free)
	p.URL = "http://" + net.JoinHostPort("127.0.0.1", p.Args[p.portAt])
	return nil
}

// IsOpenCode reports whether the command is OpenCode: its base name is
// "opencode" (or starts with "opencode-", as the npm package's binary).
func IsOpenCode(command string) bool {
	base := filepath.Base(command)
	return base == "opencode" || strings.HasPrefix(base, "opencode-") || strings.HasPrefix(base, "opencode.")
}

// portArg finds --port N or --port=N in args (before a "--").
func portArg(args []string) (port string, host string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		switch {
		case a == "--port" && i+1 < len(args):
			port = args[i+1]
			i++
		case strings.HasPrefix(a, "--port="):
			port = strings.TrimPrefix(a, "--port=")
		case a == "--hostname" && i+1 < len(args):
			host = args[i+1]
			i++
		case strings.HasPrefix(a, "--hostname="):
			host = strings.TrimPrefix(a, "--hostname=")
		}
	}
	return port, host
}

// NewPlan decides how to start command. env is the environment to pass on
// (the user's, unchanged but for the credentials, which go in the
// variables the generation reads: never on the command line). An
// OpenCode command line that serves (Decide) gets a free loopback port
// when it names none.
func NewPlan(command []string, env []string, cred Credentials) (*Plan, error) {
	if len(command) == 0 {
		return nil, errors.New("run: no command given; usage: mcp-reconnect run [flags] -- opencode [ARGS...]")
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	p := &Plan{Path: path, Args: append([]string(nil), command...)}
	password, major := cred.Password, 1
	if cred.Major == 2 {
		major, password = 2, cmp.Or(password, lookupEnv(env, PasswordEnv2))
	}
	password = cmp.Or(password, lookupEnv(env, PasswordEnv))
	if password == "" {
		// 130 random bits.
		password, p.GeneratedPassword = rand.Text(), true
	}
	p.Password = password
	// 2.x reads OPENCODE_PASSWORD first; a 1.x binary wrongly taken for
	// 2.x (a wrapper script of the user's whose target was downgraded)
	// still gets its password instead of serving unsecured.
	p.Env = setEnv(env, PasswordEnv, password)
	if major == 2 {
		p.Env = setEnv(setEnv(env, PasswordEnv2, password), PasswordEnv, password)
	}
	p.Username = DefaultUsername
	if major == 1 {
		// Without this the daemon would ask as the configured user while
		// OpenCode expects its default one, and every request would be
		// refused.
		if cred.Username != "" {
			p.Env = setEnv(p.Env, UsernameEnv, cred.Username)
		}
		p.Username = cmp.Or(lookupEnv(p.Env, UsernameEnv), DefaultUsername)
	}

	port, host := portArg(command[1:])
	if port == "" && IsOpenCode(command[0]) && Decide(command[1:], major, IsDir) == Serve {
		free, err := loopback.FreePort()
		if err != nil {
			return nil, fmt.Errorf("run: picking a port: %w", err)
		}
		port = strconv.Itoa(free)
		p.Args, p.portAt = insertBeforeDashes(p.Args, "--port", port)
		p.PortChosen = host == ""
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("run: --port %q is not a port number", port)
		}
		p.Port = n
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		p.URL = "http://" + net.JoinHostPort(host, port)
	}
	return p, nil
}

// insertBeforeDashes inserts "--port N" before a "--" (or at the end) and
// returns where N landed.
func insertBeforeDashes(args []string, flag, value string) ([]string, int) {
	i := len(args)
	if j := slices.Index(args[1:], "--"); j >= 0 {
		i = j + 1
	}
	return slices.Insert(args, i, flag, value), i + 1
}

func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func setEnv(env []string, key, value string) []string {
	return append(WithoutEnv(env, key), key+"="+value)
}

// WithoutEnv is env without the variables named keys.
func WithoutEnv(env []string, keys ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(keys, k)
	})
}

// Child is a started command.
type Child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// RestoreTerminal puts the terminal's modes back as they were before
	// the child started: a child the wrapper ended (a retry) may have
	// changed them.
	RestoreTerminal func()
	// Tail holds the end of the child's output when it was not a terminal.
	Tail *Tail
}

// forwarded are the signals the wrapper catches and, where the kernel did
// not already deliver them to the child, relays.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT}

// CatchQuit keeps SIGQUIT (Ctrl-\) from killing the wrapper for the rest of
// its life. At a terminal the kernel sends it to the whole foreground
// process group, the child included, which handles it as it would without
// the wrapper; Go's default would instead print a goroutine dump over the
// TUI, exit 2, and take the child with it through Pdeathsig. The signal is
// caught, not ignored: an ignored signal stays ignored in a child across
// exec, a caught one is reset to its default.
var CatchQuit = sync.OnceFunc(func() { signal.Notify(make(chan os.Signal, 1), syscall.SIGQUIT) })

// Start starts the plan. The child stays in the wrapper's process group, so
// keys typed at the terminal (Ctrl-C) and window resizes reach it from the
// kernel exactly as without the wrapper; signals sent to the wrapper
// itself are relayed until the child exits (forward). Its standard
// streams are the wrapper's own, so a TUI gets the terminal itself. If
// the wrapper dies, the child gets SIGTERM.
func Start(p *Plan) (*Child, error) {
	cmd := exec.Command(p.Path, p.Args[1:]...)
	cmd.Args = p.Args
	cmd.Env = p.Env
	cmd.Stdin = os.Stdin
	tail := &Tail{max: 64 << 10}
	// Keep the last output for the error message when the server never
	// comes up, unless the stream is a terminal (a TUI needs the real one).
	output := func(f *os.File) io.Writer {
		if isTerminal(f) {
			return f
		}
		return io.MultiWriter(f, tail)
	}
	cmd.Stdout, cmd.Stderr = output(os.Stdout), output(os.Stderr)
	cmd.SysProcAttr = sysProcAttr()
	// When output is copied through a pipe (not a terminal), a grandchild
	// that outlives the child can hold the pipe open; do not wait for it.
	cmd.WaitDelay = 2 * time.Second
	c := &Child{cmd: cmd, done: make(chan struct{}), Tail: tail, RestoreTerminal: func() {}}
	if st, err := term.GetState(int(os.Stdin.Fd())); err == nil {
		c.RestoreTerminal = func() { _ = term.Restore(int(os.Stdin.Fd()), st) }
	}
	// Catch the signals before the fork: one arriving between the start
	// and the relay must not kill the wrapper.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	started := make(chan error, 1)
	go func() {
		// Pdeathsig is sent when the *thread* that forked the child ends,
		// not the process. The Go runtime ends a thread only when a
		// goroutine locked to it exits, but a thread that some other code
		// locked and that later ends could be the one that forked. Forking
		// from a goroutine locked to its thread, which stays blocked in
		// Wait until the child is gone, ties Pdeathsig to the wrapper's
		// life instead.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		signal.Stop(sigs)
		return nil, fmt.Errorf("run: starting %s: %w", p.Args[0], err)
	}
	go c.forward(sigs)
	return c, nil
}

// forward relays SIGTERM and SIGHUP sent to the wrapper to the child until
// it exits. SIGINT and SIGQUIT are relayed unless the wrapper is, when the
// signal arrives, the foreground job of the terminal on its stdin: then
// the signal came from a key (Ctrl-C, Ctrl-\), the kernel sent it to the
// whole foreground process group, the child included, and a second copy
// would make a TUI see two. A wrapper in the background (`run … &`, or
// stdin a terminal it is not the foreground job of) gets them only from
// kill(2), and the child from nobody else. (A kill(2) of a foreground
// wrapper cannot be told from a key, and is not relayed.)
func (c *Child) forward(sigs chan os.Signal) {
	defer signal.Stop(sigs)
	for {
		select {
		case <-c.done:
			return
		case s := <-sigs:
			if (s == syscall.SIGINT || s == syscall.SIGQUIT) && isForeground(os.Stdin.Fd()) {
				continue
			}
			c.Signal(s)
		}
	}
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// PID is the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Signal sends sig to the child if it still runs.
func (c *Child) Signal(sig os.Signal) {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(sig)
	}
}

// ExitCode is the child's exit code once Done is closed: its own code, or
// 128+N when signal N killed it (1 when it could not be waited for).
func (c *Child) ExitCode() int {
	code, sig, _ := c.exit()
	if sig != 0 {
		return 128 + int(sig)
	}
	return code
}

// Describe says how the child ended, for a log line.
func (c *Child) Describe() string {
	switch code, sig, err := c.exit(); {
	case sig != 0:
		return fmt.Sprintf("killed by signal %d (%s)", int(sig), sig)
	case err != nil:
		return err.Error()
	default:
		return fmt.Sprintf("exited with code %d", code)
	}
}

// exit is how the child ended, once Done is closed: its exit code, or the
// signal that killed it, or the error that kept it from being waited for.
func (c *Child) exit() (code int, sig syscall.Signal, err error) {
	<-c.done
	ps := c.cmd.ProcessState
	if ps == nil {
		return 1, 0, c.err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 0, ws.Signal(), nil
	}
	return ps.ExitCode(), 0, nil
}

// isTerminal reports whether f has terminal attributes. A character
// device is not enough: /dev/null is one (stdin of a service, cron job or
// nohup), and treating it as a terminal would swallow the signals meant
// for the child.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// Tail keeps the last max bytes written to it.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

// Lines returns the last n lines.
func (t *Tail) Lines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(t.buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
