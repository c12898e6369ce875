package launch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Grammar is what an OpenCode binary's command line is made of, as far
// as telling the TUI, a server and a subcommand apart needs: its
// subcommands (aliases included) and the flags that take a value (whose
// value is no subcommand). Releases differ: 1.1 has auth where 1.18 has
// providers (and its alias auth), no plugin and no db; the 2.0 preview
// has api, console, migrate, mini, pair and service, and neither web nor
// models (testdata/help).
type Grammar struct {
	Subcommands map[string]bool
	ValueFlags  map[string]bool
}

// BuiltIn is OpenCode 1.18's grammar (`opencode --help`), with 2.x's
// `service` (a 1.x project folder named service is then passed through
// unwatched, where 2.x's subcommand would otherwise be taken for the
// TUI): what KindOf uses, and what the wrapper falls back to when a
// binary's own --help cannot be read.
var BuiltIn = Grammar{Subcommands: subcommands, ValueFlags: valueFlags}

// NeedsGrammar reports whether what args start depends on the binary's
// own grammar: their first positional word is a bare word BuiltIn does
// not know (BuiltIn would take it for the TUI's project; a later release
// may have such a subcommand, which the wrapper would give a --port and
// then stop for never answering as a server), or a flag before it is one
// BuiltIn does not know (it may take a value). Without arguments, after
// --help or --version, with a path (".", "~/src/x", "../p") or with a
// subcommand BuiltIn knows (serve, web, run, models, …), BuiltIn decides
// alone and the binary is not asked: those starts cost what they did.
func NeedsGrammar(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return false
		case a == "--help" || a == "-h" || a == "--version" || a == "-v":
			return false
		case strings.HasPrefix(a, "-"):
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if valueFlags[name] {
				i++
				continue
			}
			if !knownBoolFlags[name] {
				return true
			}
		default:
			return bareWord.MatchString(a) && !subcommands[a]
		}
	}
	return false
}

// bareWord is what a subcommand's name looks like; a path does not.
var bareWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// knownBoolFlags are BuiltIn's flags that take no value (1.18.34's).
var knownBoolFlags = map[string]bool{
	"print-logs": true, "pure": true, "mdns": true, "continue": true, "c": true, "fork": true,
	"auto": true, "mini": true, "no-replay": true, "replay": true,
}

// Kind is KindOf with the subcommands and value flags of g.
func (g Grammar) Kind(args []string) Kind {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return TUI // only positionals follow: the project
		case a == "--help" || a == "-h" || a == "--version" || a == "-v":
			return Other
		case strings.HasPrefix(a, "-"):
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if g.ValueFlags[name] {
				i++ // its value is not a subcommand
			} else if i+1 < len(args) && (args[i+1] == "true" || args[i+1] == "false") {
				i++ // yargs takes "--mdns false" as the boolean's value
			}
		case g.Subcommands[a]:
			if a == "serve" || a == "web" {
				return Server
			}
			return Other
		default:
			return TUI // [project]: the TUI in that directory
		}
	}
	return TUI
}

// AskHelp runs `command --help` and returns what it prints (1.x writes
// it to standard error, the 2.0 preview to standard output). Like
// --version it takes seconds (a JavaScript runtime starting): Versions
// remembers the grammar per binary.
func AskHelp(ctx context.Context, command string, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, command, "--help")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --help: %w", command, cmp.Or(ctx.Err(), err)) // out of time: say so
	}
	return string(out), nil
}

var (
	ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")
	// A yargs command line: "  opencode NAME …", with "[aliases: a, b]"
	// at its end.
	yargsCommandRE = regexp.MustCompile(`^\s+\S+\s+([a-z][a-z0-9-]*)(\s|$)`)
	aliasesRE      = regexp.MustCompile(`\[aliases: ([^\]]+)\]`)
	// A flag line of either format: names ("-m, --model", "--session, -s")
	// then, for the 2.0 preview, a type word or <choices>, then two
	// spaces and the description.
	flagNamesRE = regexp.MustCompile(`^\s+(-{1,2}[A-Za-z0-9][A-Za-z0-9-]*(?:,\s*-{1,2}[A-Za-z0-9][A-Za-z0-9-]*)*)(.*)$`)
	flagNameRE  = regexp.MustCompile(`-{1,2}([A-Za-z0-9][A-Za-z0-9-]*)`)
	// The 2.0 preview's subcommand lines: "  name    description".
	cliCommandRE = regexp.MustCompile(`^\s+([a-z][a-z0-9-]*)\s{2,}\S`)
)

// errNoGrammar: the text holds no list of subcommands.
var errNoGrammar = errors.New("no subcommands in the --help output")

// ParseHelp reads the grammar from what `opencode --help` prints: 1.x's
// yargs help ("Commands:" lines "opencode NAME …" with their aliases,
// "Options:" whose type is [string], [number] or [array] for a flag that
// takes a value) or the 2.0 preview's ("SUBCOMMANDS" lines "NAME
// description", "FLAGS" and "GLOBAL FLAGS" whose value is a type word or
// <choices> after the names). Colour codes, a banner and log lines
// around it are skipped.
func ParseHelp(out string) (Grammar, error) {
	g := Grammar{Subcommands: map[string]bool{}, ValueFlags: map[string]bool{}}
	section := ""
	var flag []string // the names of the yargs flag whose type may follow on the next line
	for _, line := range strings.Split(ansiRE.ReplaceAllString(out, ""), "\n") {
		line = strings.TrimRight(line, " \r")
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			flag = nil
			continue
		case !strings.HasPrefix(line, " "):
			section = strings.TrimSuffix(strings.ToUpper(trimmed), ":")
			flag = nil
			continue
		}
		switch section {
		case "COMMANDS":
			if m := yargsCommandRE.FindStringSubmatch(line); m != nil {
				g.Subcommands[m[1]] = true
			}
			if m := aliasesRE.FindStringSubmatch(line); m != nil {
				for _, a := range strings.Split(m[1], ",") {
					if a = strings.TrimSpace(a); bareWord.MatchString(a) {
						g.Subcommands[a] = true
					}
				}
			}
		case "SUBCOMMANDS":
			if m := cliCommandRE.FindStringSubmatch(line); m != nil {
				g.Subcommands[m[1]] = true
			}
		case "OPTIONS":
			m := flagNamesRE.FindStringSubmatch(line)
			if m != nil {
				flag = names(m[1])
			} else if flag == nil {
				continue // a description wrapped onto its own line
			}
			if strings.Contains(line, "[string]") || strings.Contains(line, "[number]") || strings.Contains(line, "[array]") {
				// A type that takes a value.
				for _, n := range flag {
					g.ValueFlags[n] = true
				}
			}
		case "FLAGS", "GLOBAL FLAGS":
			// "--server string   Connect…": one space, then the value's
			// type; "--standalone   Run…": the description, after two.
			if m := flagNamesRE.FindStringSubmatch(line); m != nil && len(m[2]) > 1 && m[2][0] == ' ' && m[2][1] != ' ' {
				for _, n := range names(m[1]) {
					g.ValueFlags[n] = true
				}
			}
		}
	}
	if len(g.Subcommands) == 0 {
		return Grammar{}, errNoGrammar
	}
	return g, nil
}

// names are the flag names of "-m, --model" without their dashes.
func names(s string) []string {
	var out []string
	for _, m := range flagNameRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// sortedKeys lists a set, for the cache file.
func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// setOf is the set of a list.
func setOf(list []string) map[string]bool {
	out := make(map[string]bool, len(list))
	for _, k := range list {
		out[k] = true
	}
	return out
}
