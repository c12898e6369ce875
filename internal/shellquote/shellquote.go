// Package shellquote quotes words for a POSIX shell, so that what the
// program prints as a command (a hint such as `opencode mcp auth NAME`,
// the commands `service install --dry-run` would run) can be pasted and
// runs exactly that. It is the project's one shell quoter; systemd's
// unit-file quoting is another syntax and lives with the unit
// (internal/service).
package shellquote

import "strings"

// Quote returns s as one shell word: as it is when it holds only
// characters no shell treats specially, otherwise in single quotes (a
// quote inside written '\”). The empty string is ”.
//
// Quote does not make s safe to print on a terminal: a control character
// stays one inside the quotes (see package termsafe for that).
func Quote(s string) string {
	if s != "" && !strings.ContainsFunc(s, special) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word and joins them with spaces: a command line.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// special reports whether r needs quoting. Letters, digits and
// -_./:@=%+, mean nothing to a shell anywhere in a word.
func special(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=%+,", r))
}
