package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapes(t *testing.T) {
	for _, c := range []struct{ in, line, text string }{
		{"plain: /home/me/my projéct 日本", "plain: /home/me/my projéct 日本", "plain: /home/me/my projéct 日本"},
		{"osc \x1b]52;c;eA==\x07 end", `osc \x1b]52;c;eA==\x07 end`, `osc \x1b]52;c;eA==\x07 end`},
		{"a\r\x1b[2Kb", `a\r\x1b[2Kb`, `a\r\x1b[2Kb`},
		{"two\nlines\tand tab", `two\nlines\tand tab`, "two\nlines\tand tab"},
		{"del\x7f c1\u009b[31m", `del\x7f c1\u009b[31m`, `del\x7f c1\u009b[31m`},
		{"rlo\u202eisolate\u2066\u2069 mark\u200f sep\u2028", `rlo\u202eisolate\u2066\u2069 mark\u200f sep\u2028`, `rlo\u202eisolate\u2066\u2069 mark\u200f sep\u2028`},
		{"raw \x9b byte \xff", `raw \x9b byte \xff`, `raw \x9b byte \xff`},
		{"nul\x00", `nul\x00`, `nul\x00`},
		{"replacement \ufffd kept", "replacement \ufffd kept", "replacement \ufffd kept"},
	} {
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
	}
}

// check is what every output must satisfy: valid UTF-8 with nothing a
// terminal obeys (but "\n" and "\t" in Text), and safe text unchanged.
func check(t *testing.T, in, out string, layout bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("%q -> %q: not UTF-8", in, out)
	}
	for _, r := range out {
		if Unsafe(r) && !(layout && (r == '\n' || r == '\t')) {
			t.Fatalf("%q -> %q: holds %U", in, out, r)
		}
	}
	safe := utf8.ValidString(in) && !strings.ContainsFunc(in, func(r rune) bool {
		return Unsafe(r) && !(layout && (r == '\n' || r == '\t'))
	})
	if safe && out != in {
		t.Fatalf("%q -> %q: safe text changed", in, out)
	}
	if layout && strings.Count(out, "\n") != strings.Count(in, "\n") {
		t.Fatalf("%q -> %q: newlines lost", in, out)
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{
		"", "plain", "Streamable HTTP error: \x1b]52;c;Y3VybCBldmlsLnNofHNo\x07\r\x1b[2Kremote  connected",
		"a\nb\tc", "\u202e\u2066\u200e\u061c", "\x9b31m", "\xc3", "é日\ufffd", "\x1bP+q\x1b\\", "\u0085next line",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check(t, s, Line(s), false)
		check(t, s, Text(s), true)
		if Line(Line(s)) != Line(s) || Text(Text(s)) != Text(s) {
			t.Fatalf("%q: escaping twice changes it", s)
		}
	})
}
