// Package termsafe makes text that came from outside (OpenCode, an MCP
// server behind it, a file another program wrote) safe to print on a
// terminal: every character a terminal would obey instead of show is
// written as a visible escape.
//
// Error strings carry what a remote MCP server answered, and server
// names and directories come from OpenCode, so a server could otherwise
// set the clipboard (OSC 52), rewrite what a table shows (CSI, a bare
// "\r"), or reverse a line (U+202E). Escaped are C0 controls, DEL, C1
// controls, the bidirectional overrides, embeddings, isolates and marks,
// the Unicode line and paragraph separators, and bytes that are not
// UTF-8 (0x9b alone is CSI to a terminal that is not in UTF-8 mode).
// Everything else, non-ASCII letters included, is left as it is.
//
// JSON output needs none of this: encoding/json escapes control
// characters itself.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line returns s with every control character escaped, newlines and tabs
// included: for a table cell or anything else that must stay on one line.
func Line(s string) string { return escape(s, false) }

// Text returns s with every control character escaped except "\n" and
// "\t", which keep their layout: for a message of several lines.
func Text(s string) string { return escape(s, true) }

// Unsafe reports whether a terminal could take r as a command rather
// than as a character to show.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || // C0, DEL, C1
		unicode.Is(unicode.Bidi_Control, r) ||
		r == '\u2028' || r == '\u2029'
}

// escape copies s only from its first character to escape on: most text
// holds none, and is returned as it is.
func escape(s string, layout bool) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		esc := ""
		switch {
		case layout && (r == '\n' || r == '\t'):
		case r == '\n':
			esc = `\n`
		case r == '\t':
			esc = `\t`
		case r == '\r':
			esc = `\r`
		case r == utf8.RuneError && n <= 1, Unsafe(r) && r < 0x80:
			esc = fmt.Sprintf(`\x%02x`, s[i]) // not UTF-8, or a C0 control or DEL
		case Unsafe(r):
			esc = fmt.Sprintf(`\u%04x`, r)
		}
		if esc != "" {
			b.WriteString(s[done:i])
			b.WriteString(esc)
			done = i + n
		}
		i += n
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}
