package service

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// execStartArgs reads a unit's ExecStart line back as systemd does
// (systemd.service(5), "Command lines"): specifiers first ("%%" is a
// literal "%", any other "%" is a specifier), then words, double quotes
// and their backslash escapes, then, in the arguments only, variables:
// "$$" is a literal "$", while "$NAME" and "${NAME}" would be replaced by
// the environment. An unescaped specifier or variable is an error: the
// service would run something other than what install was asked for.
func execStartArgs(unit string) ([]string, error) {
	var line string
	for l := range strings.SplitSeq(unit, "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			line = v
		}
	}
	if line == "" {
		return nil, fmt.Errorf("no ExecStart line")
	}
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] != '%' {
			b.WriteByte(line[i])
			continue
		}
		if i+1 < len(line) && line[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		return nil, fmt.Errorf("specifier %q in %q", line[i:min(i+2, len(line))], line)
	}
	line = b.String()
	var words []string
	for i := 0; i < len(line); {
		if line[i] == ' ' {
			i++
			continue
		}
		if line[i] != '"' {
			return nil, fmt.Errorf("unquoted word at %q", line[i:])
		}
		var w strings.Builder
		i++
		for ; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' && i+1 < len(line) {
				i++
			}
			w.WriteByte(line[i])
		}
		if i == len(line) {
			return nil, fmt.Errorf("unterminated quote in %q", line)
		}
		i++
		words = append(words, w.String())
	}
	for n, w := range words[1:] {
		var a strings.Builder
		for i := 0; i < len(w); i++ {
			if w[i] != '$' || i+1 == len(w) {
				a.WriteByte(w[i])
				continue
			}
			switch c := w[i+1]; {
			case c == '$':
				a.WriteByte('$')
				i++
			case c == '{' || c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
				return nil, fmt.Errorf("argument %q expands the variable at %q", w, w[i:])
			default:
				a.WriteByte('$')
			}
		}
		words[n+1] = a.String()
	}
	return words, nil
}

// Every "$" of the arguments reaches watch as a "$": a config path holding
// "$HOME" or "${X}" is that path, not the service's environment spliced
// in. The executable itself is not expanded by systemd, so its "$" stays
// single (TestUnitPassesSystemdAnalyzeVerify has systemd find it).
func TestExecStartKeepsDollarsLiteral(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	for _, spec := range []Spec{
		{Binary: "/usr/bin/mcp-reconnect", Config: "/home/u/$HOME/c.toml"},
		{Binary: "/usr/bin/mcp-reconnect", Config: "/home/u/${XDG_CONFIG_HOME}/$$/c$.toml"},
		{Binary: "/opt/$HOME/%h/mcp-reconnect", Config: `/c/%%h/$PATH "q" b\s.toml`},
	} {
		f, err := m.p.render(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := execStartArgs(string(f.Content))
		if err != nil {
			t.Errorf("%+v: %v\n%s", spec, err, f.Content)
			continue
		}
		want := append(spec.Args(), "--"+EnvFileFlag, m.p.envFile())
		if !slices.Equal(got, want) {
			t.Errorf("systemd would run %q, want %q\n%s", got, want, f.Content)
		}
	}
}

// The reader above is not vacuous: it refuses a variable, a specifier and
// an unquoted word, and keeps "$$" as one dollar.
func TestExecStartArgsReadsAsSystemd(t *testing.T) {
	for _, bad := range []string{
		`ExecStart="/b" "watch" "--config" "$HOME/c"`,
		`ExecStart="/b" "${X}"`,
		`ExecStart="/b" "%h"`,
		`ExecStart=/b watch`,
	} {
		if got, err := execStartArgs(bad); err == nil {
			t.Errorf("%s read as %q, want an error", bad, got)
		}
	}
	got, err := execStartArgs(`ExecStart="/a/$X/b" "$$HOME" "100%%" "q\"\\"`)
	if want := []string{"/a/$X/b", "$HOME", "100%", `q"\`}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}
