package launch

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// help reads a recorded `opencode --help` (testdata/help: the output of
// the npm releases the e2e tests install, and of the v2 preview build,
// standard output and error together, as AskHelp reads them).
func help(t *testing.T, version string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "help", "opencode-"+version+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func set(words string) map[string]bool { return setOf(strings.Fields(words)) }

// ParseHelp reads each release's own grammar from its --help: the yargs
// help of 1.x (commands and their aliases, options typed [string],
// [number] or [array]; a banner, colour codes and log lines around it)
// and the 2.0 preview's (SUBCOMMANDS, FLAGS with a type after the names).
func TestParseHelpOfEachRelease(t *testing.T) {
	const v118 = "completion acp mcp attach run debug providers auth agent upgrade uninstall serve web models stats export import github pr session plugin plug db"
	for _, tc := range []struct {
		version     string
		subcommands string
		valueFlags  string
	}{
		{"1.18.34", v118, "log-level port hostname mdns-domain cors model m session s prompt agent replay-limit"},
		{"1.14.48", v118, "log-level port hostname mdns-domain cors model m session s prompt agent"},
		{"1.1.65", "completion acp mcp attach run debug auth agent upgrade uninstall serve web models stats export import github pr session",
			"log-level port hostname mdns-domain cors model m session s prompt agent"},
		{"0.0.0-v2src-44b6938b", "api debug console auth mcp plugin migrate mini run service pair serve", "server session s completions log-level"},
	} {
		g, err := ParseHelp(help(t, tc.version))
		if err != nil {
			t.Errorf("%s: %v", tc.version, err)
			continue
		}
		if want := set(tc.subcommands); !maps.Equal(g.Subcommands, want) {
			t.Errorf("%s: subcommands %v, want %v", tc.version, sortedKeys(g.Subcommands), sortedKeys(want))
		}
		if want := set(tc.valueFlags); !maps.Equal(g.ValueFlags, want) {
			t.Errorf("%s: value flags %v, want %v", tc.version, sortedKeys(g.ValueFlags), sortedKeys(want))
		}
	}
	for _, junk := range []string{"", "opencode 1.18.34\n", "Usage: something else\n  --flag  x\n"} {
		if _, err := ParseHelp(junk); err == nil {
			t.Errorf("ParseHelp(%q) found a grammar", junk)
		}
	}
}

// BuiltIn is 1.18.34's grammar (with 2.x's service), so that KindOf
// without the binary's word says what 1.18.34 itself would.
func TestBuiltInIsTheRecordedGrammar(t *testing.T) {
	g, err := ParseHelp(help(t, "1.18.34"))
	if err != nil {
		t.Fatal(err)
	}
	g.Subcommands["service"] = true
	if !maps.Equal(g.Subcommands, BuiltIn.Subcommands) || !maps.Equal(g.ValueFlags, BuiltIn.ValueFlags) {
		t.Fatalf("BuiltIn %v %v, 1.18.34's %v %v", sortedKeys(BuiltIn.Subcommands), sortedKeys(BuiltIn.ValueFlags), sortedKeys(g.Subcommands), sortedKeys(g.ValueFlags))
	}
}

// Every flag of 1.18.34 is known to BuiltIn, as taking a value or not:
// NeedsGrammar then asks the binary nothing for a 1.18 command line that
// starts with flags.
func TestBuiltInKnowsEveryFlagOf118(t *testing.T) {
	for _, line := range strings.Split(help(t, "1.18.34"), "\n") {
		m := flagNamesRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, n := range names(m[1]) {
			if n != "help" && n != "h" && n != "version" && n != "v" && !valueFlags[n] && !knownBoolFlags[n] {
				t.Errorf("--%s of 1.18.34 is unknown to BuiltIn", n)
			}
		}
	}
}

// What a command line starts depends on the release: the same word is a
// subcommand of one and the TUI's project in another.
func TestKindDependsOnTheRelease(t *testing.T) {
	grammar := func(v string) Grammar {
		g, err := ParseHelp(help(t, v))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	v1, old, v2 := grammar("1.18.34"), grammar("1.1.65"), grammar("0.0.0-v2src-44b6938b")
	for _, tc := range []struct {
		g    Grammar
		args string
		want Kind
	}{
		{v1, "db", Other},
		{old, "db", TUI}, // 1.1 has no db: a folder named db
		{old, "auth login", Other},
		{v1, "serve --port 4096", Server},
		{v2, "serve --service", Server},
		{v2, "web", TUI}, // the preview has no web
		{v2, "models", TUI},
		{v2, "mini", Other},
		{v2, "migrate", Other},
		{v2, "--server http://127.0.0.1:1 run hi", Other},
		{v2, "--session ses_1 project", TUI},
		{v2, "--standalone", TUI},
		{v1, "-m openai/gpt run hi", Other},
		{v1, "--print-logs run hi", Other},
	} {
		if got := tc.g.Kind(strings.Fields(tc.args)); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.args, got, tc.want)
		}
	}
}

// The binary is asked its grammar only where BuiltIn cannot decide: a
// bare word it does not know where a subcommand may be, or a flag it
// does not know before it. No arguments, --help, --version, a path, a
// subcommand of 1.18: not asked.
func TestNeedsGrammar(t *testing.T) {
	for args, want := range map[string]bool{
		"":                            false,
		"--version":                   false,
		"-h":                          false,
		".":                           false,
		"~/src/shop":                  false,
		"../p":                        false,
		"/home/u/p":                   false,
		"-- models":                   false,
		"--port 4096":                 false,
		"--port=4096 --print-logs":    false,
		"serve":                       false,
		"models":                      false,
		"--log-level DEBUG run hi":    false,
		"shop":                        true, // a project, or a subcommand of a later release
		"migrate":                     true, // the v2 preview's
		"--port 1 mini":               true,
		"--server http://x":           true, // a 2.x flag BuiltIn does not know
		"--mini --continue":           false,
		"Projects":                    false, // capitals: no subcommand is named so
		"--agent build ~/src/project": false,
	} {
		if got := NeedsGrammar(strings.Fields(args)); got != want {
			t.Errorf("NeedsGrammar(%q) = %v, want %v", args, got, want)
		}
	}
}

// countingFacts is a cache whose --version and --help are answered from
// the binary's file (its first line the version, the rest its help),
// counting the questions and recording whether the two overlapped.
type countingFacts struct {
	mu                sync.Mutex
	versions, helps   int
	running, overlaps int
}

func (c *countingFacts) versionsFor(t *testing.T) *Versions {
	enter := func() {
		c.mu.Lock()
		c.running++
		if c.running > 1 {
			c.overlaps++
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}
	read := func(path string) (string, string, error) {
		b, err := os.ReadFile(path)
		first, rest, _ := strings.Cut(string(b), "\n")
		return first, rest, err
	}
	return &Versions{File: filepath.Join(t.TempDir(), "cache", "opencode-versions.json"),
		Ask: func(_ context.Context, path string, _ []string) (string, error) {
			c.mu.Lock()
			c.versions++
			c.mu.Unlock()
			enter()
			v, _, err := read(path)
			return v, err
		},
		Help: func(_ context.Context, path string, _ []string) (string, error) {
			c.mu.Lock()
			c.helps++
			c.mu.Unlock()
			enter()
			_, h, err := read(path)
			return h, err
		}}
}

// The grammar is asked of a binary once, beside its version (both at
// once: a first start pays one question's time), remembered under the
// same key, and asked again when the binary changes; a binary whose
// --help holds no grammar is remembered as such (BuiltIn, not asked at
// every start); a script outside an npm tree is never asked it.
func TestFactsRememberTheGrammar(t *testing.T) {
	c := &countingFacts{}
	v := c.versionsFor(t)
	bin := filepath.Join(t.TempDir(), "opencode")
	writeBinary(t, bin, "1.1.65\n"+help(t, "1.1.65"))
	ctx := context.Background()

	f := v.Facts(ctx, bin, nil, true)
	if f.Major != 1 || f.MajorErr != nil || f.GrammarErr != nil || f.Cached || f.Grammar.Subcommands["db"] || !f.Grammar.Subcommands["auth"] {
		t.Fatalf("first: %+v", f)
	}
	if c.versions != 1 || c.helps != 1 || c.overlaps == 0 {
		t.Fatalf("asked %d versions, %d helps, overlapping %d times; want one each, at once", c.versions, c.helps, c.overlaps)
	}
	f = v.Facts(ctx, bin, nil, true)
	if !f.Cached || f.Major != 1 || f.Grammar.Subcommands["db"] || c.versions != 1 || c.helps != 1 {
		t.Fatalf("second: %+v after %d versions, %d helps; want it remembered", f, c.versions, c.helps)
	}
	if f := v.Facts(ctx, bin, nil, false); !f.Cached || f.Major != 1 || f.MajorErr != nil || !maps.Equal(f.Grammar.Subcommands, BuiltIn.Subcommands) {
		t.Fatalf("without the grammar asked for: %+v", f)
	}
	// The version alone first, then the grammar too: only --help is asked.
	other := filepath.Join(t.TempDir(), "opencode")
	writeBinary(t, other, "1.18.34\n"+help(t, "1.18.34"))
	if f := v.Facts(ctx, other, nil, false); f.MajorErr != nil || c.helps != 1 {
		t.Fatalf("the version alone: %+v, %d helps", f, c.helps)
	}
	if f := v.Facts(ctx, other, nil, true); f.Cached || !f.Grammar.Subcommands["db"] || c.versions != 2 || c.helps != 2 {
		t.Fatalf("after the version alone: %+v, %d versions, %d helps", f, c.versions, c.helps)
	}
	if f := v.Facts(ctx, bin, nil, true); !f.Cached || f.Grammar.Subcommands["db"] {
		t.Fatalf("the first binary's entry was lost: %+v", f)
	}

	// An upgrade in place: asked again, both.
	time.Sleep(10 * time.Millisecond)
	writeBinary(t, bin+".new", "0.0.0-v2src-44b6938b\n"+help(t, "0.0.0-v2src-44b6938b"))
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	if f := v.Facts(ctx, bin, nil, true); f.Cached || f.Major != 2 || !f.Grammar.Subcommands["mini"] || c.versions != 3 || c.helps != 3 {
		t.Fatalf("after an upgrade: %+v, %d versions, %d helps", f, c.versions, c.helps)
	}

	// No grammar in its --help: BuiltIn, remembered.
	mute := filepath.Join(t.TempDir(), "opencode")
	writeBinary(t, mute, "1.18.34\nopencode, a tool\n")
	if f := v.Facts(ctx, mute, nil, true); f.GrammarErr == nil || !maps.Equal(f.Grammar.Subcommands, BuiltIn.Subcommands) {
		t.Fatalf("no grammar: %+v", f)
	}
	if f := v.Facts(ctx, mute, nil, true); !f.Cached || f.GrammarErr == nil || c.helps != 4 {
		t.Fatalf("no grammar, again: %+v after %d helps; want it remembered", f, c.helps)
	}

	// A script outside an npm tree: its version every time, never --help.
	shim := filepath.Join(t.TempDir(), "opencode")
	writeBinary(t, shim, "#!/bin/sh\n")
	before := c.helps
	for range 2 {
		if f := v.Facts(ctx, shim, nil, true); f.Cached || !maps.Equal(f.Grammar.Subcommands, BuiltIn.Subcommands) {
			t.Fatalf("a shim: %+v", f)
		}
	}
	if c.helps != before {
		t.Fatalf("a shim was asked --help %d times", c.helps-before)
	}
}

// A --help that ran out of time is not remembered: asked again next time.
func TestFactsAskAgainAfterATimeout(t *testing.T) {
	n := 0
	v := &Versions{File: filepath.Join(t.TempDir(), "cache", "v.json"),
		Ask: func(context.Context, string, []string) (string, error) { return "1.18.34", nil },
		Help: func(context.Context, string, []string) (string, error) {
			n++
			return "", context.DeadlineExceeded
		}}
	bin := filepath.Join(t.TempDir(), "opencode")
	writeBinary(t, bin, "x")
	for range 2 {
		if f := v.Facts(context.Background(), bin, nil, true); !errors.Is(f.GrammarErr, context.DeadlineExceeded) || f.Cached {
			t.Fatalf("%+v", f)
		}
	}
	if n != 2 {
		t.Fatalf("asked %d times, want 2", n)
	}
}
