package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commands is every command a user can call, completion's included.
func commands(t *testing.T) []*cobra.Command {
	t.Helper()
	root := newRoot(nil, nil)
	root.InitDefaultCompletionCmd()
	var all []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		all = append(all, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return all
}

// mustMention is, per command, the environment variables its --help must
// name. watch, run and doctor take every flag from the environment (flags >
// env > config file); status and reconnect find the daemon.
func mustMention(c *cobra.Command) []string {
	switch c.Name() {
	case "watch", "run", "doctor":
		var env []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" && f.Name != "json" {
				env = append(env, "$"+envName(f.Name))
			}
		})
		return env
	case "status", "reconnect":
		if c.Parent() != nil && c.Parent().Parent() == nil { // not `service status`
			return []string{"$MCP_RECONNECT_STATUS_ADDR"}
		}
	}
	return nil
}

var envInUsage = regexp.MustCompile(`\[\$([A-Z_]+)`)

// Every command's --help exits 0, says what the command does, and names the
// environment variables it reads; a variable a flag's help names is the
// one that sets it.
func TestHelpOfEveryCommand(t *testing.T) {
	all := commands(t)
	if len(all) < 10 {
		t.Fatalf("only %d commands found", len(all))
	}
	for _, c := range all {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"root"}, path...), "_"), func(t *testing.T) {
			code, out, errOut := runCLI(t, append(path, "--help")...)
			if code != 0 || errOut != "" {
				t.Fatalf("--help: exit %d, stderr %q", code, errOut)
			}
			if c.Long == "" || !strings.Contains(out, strings.TrimSpace(c.Long)[:20]) {
				t.Errorf("--help does not say what it does at length (no Long text):\n%s", out)
			}
			for _, env := range mustMention(c) {
				if !strings.Contains(out, env) {
					t.Errorf("--help does not mention %s", env)
				}
			}
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if m := envInUsage.FindStringSubmatch(f.Usage); m != nil && m[1] != envName(f.Name) {
					t.Errorf("--%s says $%s, but $%s sets it", f.Name, m[1], envName(f.Name))
				}
			})
		})
	}
}

// Each shell's script is cobra's: it hooks the program name and asks the
// binary itself (`mcp-reconnect __complete …`) at each <Tab>, so the
// subcommands and flags it offers are always those of the installed
// binary. Checked here: the script, and what __complete answers.
func TestCompletion(t *testing.T) {
	hooks := map[string]string{
		"bash": "complete -o default -F __start_mcp-reconnect mcp-reconnect",
		"zsh":  "compdef _mcp-reconnect mcp-reconnect",
		"fish": "complete -c mcp-reconnect",
	}
	for shell, hook := range hooks {
		code, out, errOut := runCLI(t, "completion", shell)
		if code != 0 || errOut != "" {
			t.Fatalf("completion %s: exit %d, stderr %q", shell, code, errOut)
		}
		if !strings.Contains(out, hook) || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: script lacks %q or the __complete call:\n%.400s", shell, hook, out)
		}
	}
	code, out, _ := runCLI(t, "__complete", "")
	if code != 0 {
		t.Fatalf("__complete: exit %d", code)
	}
	for _, sub := range []string{"run", "watch", "status", "reconnect", "doctor", "version", "completion", "man"} {
		if !regexp.MustCompile(`(?m)^` + sub + `\t`).MatchString(out) {
			t.Errorf("__complete '' does not offer %s:\n%s", sub, out)
		}
	}
	if _, out, _ := runCLI(t, "__complete", "watch", "--max-"); !strings.Contains(out, "--max-delay") || !strings.Contains(out, "--max-concurrent") {
		t.Errorf("__complete watch --max- offers:\n%s", out)
	}
}

// man writes one page per command, in man(7) format, with the same text as
// --help.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	if code, _, errOut := runCLI(t, "man", dir); code != 0 {
		t.Fatalf("man: exit %d %s", code, errOut)
	}
	for _, c := range commands(t) {
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no page for %q: %v", c.CommandPath(), err)
			continue
		}
		page := string(b)
		if !strings.HasPrefix(page, ".nh\n.TH \"MCP-RECONNECT\" \"1\"") || !strings.Contains(page, ".SH DESCRIPTION") {
			t.Errorf("%s is not a man page:\n%.300s", name, page)
		}
		for _, env := range mustMention(c) {
			if !strings.Contains(page, env) {
				t.Errorf("%s does not mention %s", name, env)
			}
		}
	}
	code, out, _ := runCLI(t, "man")
	if code != 0 || !strings.Contains(out, ".SH NAME\nmcp-reconnect - Keep the MCP servers") {
		t.Errorf("man to stdout: exit %d\n%.300s", code, out)
	}
}

// doctor has only the flags it reads, each in its own words: none of
// watch's schedule, logging or status-API tunables, and no flag text
// copied from watch (--directory is not "to watch from the start").
// --allow-http-password means the same for both: both send the password.
func TestDoctorHelpHasOnlyItsFlagsInItsWords(t *testing.T) {
	var doctor, watch *cobra.Command
	for _, c := range commands(t) {
		switch c.CommandPath() {
		case "mcp-reconnect doctor":
			doctor = c
		case "mcp-reconnect watch":
			watch = c
		}
	}
	for _, name := range []string{"initial-delay", "max-delay", "idle-interval", "jitter", "max-concurrent", "fast-attempts", "slow-interval",
		"stable-after", "log-level", "log-format", "log-file", "status-public", "probe", "toast", "netwatch", "allow-duplicate"} {
		if doctor.Flags().Lookup(name) != nil {
			t.Errorf("doctor has --%s, which it does not read", name)
		}
	}
	doctor.Flags().VisitAll(func(f *pflag.Flag) {
		if w := watch.Flags().Lookup(f.Name); w != nil && w.Usage == f.Usage && f.Name != "allow-http-password" {
			t.Errorf("doctor's --%s says what watch's does: %q", f.Name, f.Usage)
		}
	})
	_, out, _ := runCLI(t, "doctor", "--help")
	for _, copied := range []string{"to watch from the start", "listen address", "stable-after"} {
		if strings.Contains(out, copied) {
			t.Errorf("doctor --help says %q:\n%s", copied, out)
		}
	}
}
