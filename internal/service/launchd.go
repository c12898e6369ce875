package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Label is the launchd agent's label, reverse-DNS after the project.
const Label = "dev.mcp-reconnect.watch"

// launchd is the macOS backend: a launchd agent in the gui/<uid> domain,
// logging to ~/Library/Logs/mcp-reconnect.
type launchd struct{ env Env }

func (l launchd) kind() string { return "launchd" }

func (l launchd) path() string {
	return filepath.Join(l.env.Home, "Library", "LaunchAgents", Label+".plist")
}

func (l launchd) describe() string { return "launchd agent " + l.path() }

func (l launchd) logDir() string {
	return filepath.Join(l.env.Home, "Library", "Logs", "mcp-reconnect")
}

// logFile holds the daemon's stderr (its log) and stdout.
func (l launchd) logFile() string { return filepath.Join(l.logDir(), "watch.log") }

func (l launchd) logs() string { return l.logFile() }

func (l launchd) secretsHint() string {
	return "a password goes in the config file (key password, chmod 600); the OpenCode 2 service needs none (watch reads its service.json); launchd agents have no environment file"
}

func (l launchd) managerDirs() []string { return nil }

func (l launchd) domain() string { return "gui/" + strconv.Itoa(l.env.UID) }

func (l launchd) target() string { return l.domain() + "/" + Label }

// render writes the plist. KeepAlive with SuccessfulExit false restarts
// the daemon when it exits non-zero or is killed, not when it stops
// cleanly (nor when it is refused as a duplicate: DuplicateExitEnv);
// ThrottleInterval spaces the restarts.
func (l launchd) render(spec Spec) (File, error) {
	if err := l.env.plainPaths(l.path(), l.logFile()); err != nil {
		return File{}, err
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">` + "\n")
	fmt.Fprintf(&b, "<!-- %s; `mcp-reconnect service uninstall` removes it. No secrets here: a password goes in the config file (chmod 600). -->\n", Marker)
	b.WriteString(`<plist version="1.0">` + "\n<dict>\n")
	key := func(k string) { fmt.Fprintf(&b, "\t<key>%s</key>\n", xmlText(k)) }
	str := func(indent, v string) { fmt.Fprintf(&b, "%s<string>%s</string>\n", indent, xmlText(v)) }
	key("Label")
	str("\t", Label)
	key("ProgramArguments")
	b.WriteString("\t<array>\n")
	for _, a := range spec.Args() {
		str("\t\t", a)
	}
	b.WriteString("\t</array>\n")
	// A daemon refused because another one watches the same OpenCode
	// server exits 0 here: KeepAlive restarts every other status, and it
	// would be refused again every ThrottleInterval for ever.
	env := append(l.env.pinnedEnv(), [2]string{DuplicateExitEnv, "0"})
	key("EnvironmentVariables")
	b.WriteString("\t<dict>\n")
	for _, kv := range env {
		fmt.Fprintf(&b, "\t\t<key>%s</key>\n", xmlText(kv[0]))
		str("\t\t", kv[1])
	}
	b.WriteString("\t</dict>\n")
	key("RunAtLoad")
	b.WriteString("\t<true/>\n")
	key("KeepAlive")
	b.WriteString("\t<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>\n\t</dict>\n")
	key("ThrottleInterval")
	fmt.Fprintf(&b, "\t<integer>%d</integer>\n", RestartSec)
	key("StandardOutPath")
	str("\t", l.logFile())
	key("StandardErrorPath")
	str("\t", l.logFile())
	b.WriteString("</dict>\n</plist>\n")
	return File{Path: l.path(), Mode: 0o644, Content: []byte(b.String())}, nil
}

func xmlText(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func (l launchd) installCommands(again bool) [][]string {
	var cmds [][]string
	if again {
		// bootstrap refuses a label that is loaded already.
		cmds = append(cmds, []string{"launchctl", "bootout", l.target()})
	}
	return append(cmds, []string{"launchctl", "bootstrap", l.domain(), l.path()})
}

func (l launchd) stopCommands() [][]string {
	return [][]string{{"launchctl", "bootout", l.target()}}
}

func (l launchd) afterRemoveCommands() [][]string { return nil }

// notLoaded: bootout of a label that is not loaded exits 3 ("No such
// process") or 113 ("Could not find specified service").
func (l launchd) notLoaded(out []byte, err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) && (ee.ExitCode() == 3 || ee.ExitCode() == 113) {
		return true
	}
	return bytes.Contains(out, []byte("No such process")) || bytes.Contains(out, []byte("Could not find"))
}

func (l launchd) running(ctx context.Context, r Runner) (Running, error) {
	return l.print(ctx, r, l.target())
}

// print asks `launchctl print` about target (the agent's, or brew
// services' own).
func (l launchd) print(ctx context.Context, r Runner, target string) (Running, error) {
	out, err := r.Run(ctx, []string{"launchctl", "print", target})
	if err != nil {
		if l.notLoaded(out, err) {
			return Running{State: "not loaded", Restarts: -1}, nil
		}
		return Running{}, fmt.Errorf("launchctl print %s: %v%s", target, err, indentOutput(out))
	}
	return parseLaunchctlPrint(out), nil
}

// parseLaunchctlPrint reads the service's own "state = …", "pid = …" and
// "runs = …" lines (one tab deep; nested blocks are deeper).
func parseLaunchctlPrint(out []byte) Running {
	run := Running{Restarts: -1}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "\t\t") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(line), " = ")
		if !ok {
			continue
		}
		switch k {
		case "state":
			if run.State == "" {
				run.State = v
			}
		case "pid":
			if run.PID == 0 {
				run.PID, _ = strconv.Atoi(v)
			}
		case "runs":
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				run.Restarts = n - 1
			}
		}
	}
	run.Active = run.State == "running" && run.PID > 0
	return run
}
