package procview

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
)

// mask replaces a secret.
const mask = "***"

// secretName matches the names of flags, variables, headers and query
// parameters whose values are secrets.
var secretName = regexp.MustCompile(`(?i)(token|secret|passw|pwd|key|auth|credential|cookie|session)`)

var (
	// header flags take "Name: value".
	headerFlag = map[string]bool{"-H": true, "--header": true, "-header": true, "--headers": true, "--http-header": true}
	// a "Name: value" header whose name is secret-ish, anywhere in an arg.
	secretHeader = regexp.MustCompile(`(?i)\b(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key|x-auth-token|[a-z0-9-]*(?:token|secret|key|auth)[a-z0-9-]*)(\s*:\s*)(\S.*)$`)
	// "Bearer abc", "Basic abc", "token abc".
	scheme = regexp.MustCompile(`(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{6,}`)
	// "name": "value" in JSON (--config '{"githubPersonalAccessToken": …}')
	// whose name is secret-ish.
	jsonSecret = regexp.MustCompile(`(?i)("[^"]*(?:token|secret|passw|pwd|key|auth|credential|cookie|session)[^"]*"\s*:\s*)"(?:[^"\\]|\\.)*"`)
	// user:password@ in a URL.
	userinfo = regexp.MustCompile(`(://[^/\s:@]*:)[^/\s@]+@`)
	// secret-ish query parameters or NAME=value assignments.
	assignment = regexp.MustCompile(`(?i)([A-Za-z0-9_.-]*(?:token|secret|passw|pwd|api[-_]?key|access[-_]?key|private[-_]?key|auth|credential|cookie|session|sig|signature)[A-Za-z0-9_.-]*=)[^&\s]+`)
	// tokens known by their shape: GitHub, GitLab, Slack, OpenAI-style,
	// Stripe, AWS access key ids, JWTs.
	tokenShape = regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|[sr]k_(live|test)_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})`)
)

// Redact returns argv with the values that look like secrets masked:
// header values (after -H/--header, or any "Authorization: ..."), the
// values of flags and NAME=value words whose name says token, secret,
// password, key, auth or cookie, passwords in URLs, "Bearer ..." and
// tokens known by their shape. It errs on the side of masking. A
// process title (one word holding spaces: npm's "npm exec pkg --token
// x") is masked word by word, as the command line it stands for, and
// then as a whole: a header in it masks everything after it.
func Redact(argv []string) []string {
	if argv == nil {
		return nil
	}
	if isTitle(argv) {
		// Word by word for the flags, then whole: the title lost the
		// quotes, so a value may span words ("-H Authorization: Bearer x").
		return []string{redactWord(strings.Join(Redact(strings.Split(argv[0], " ")), " "))}
	}
	out := make([]string, len(argv))
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case headerFlag[a] && i+1 < len(argv):
			out[i] = a
			i++
			out[i] = maskHeader(argv[i])
		case hasValue && headerFlag[name]:
			out[i] = name + "=" + maskHeader(value)
		case isOption(a) && !hasValue && secretName.MatchString(a) && i+1 < len(argv) && !isOption(argv[i+1]):
			out[i] = a
			i++
			out[i] = mask
		case isOption(a) && hasValue && secretName.MatchString(name):
			out[i] = name + "=" + mask
		default:
			out[i] = redactWord(a)
		}
	}
	return out
}

// isTitle: argv is one word holding a space, what a process that set
// its title shows.
func isTitle(argv []string) bool { return len(argv) == 1 && strings.Contains(argv[0], " ") }

// maskHeader keeps a header's name and masks its value.
func maskHeader(h string) string {
	if name, _, ok := strings.Cut(h, ":"); ok {
		return name + ": " + mask
	}
	return mask
}

// redactWord masks the secrets inside one word.
func redactWord(a string) string {
	a = jsonSecret.ReplaceAllString(a, "${1}\""+mask+"\"")
	a = secretHeader.ReplaceAllString(a, "${1}${2}"+mask)
	a = scheme.ReplaceAllString(a, "${1}${2}"+mask)
	a = userinfo.ReplaceAllString(a, "${1}"+mask+"@")
	a = assignment.ReplaceAllString(a, "${1}"+mask)
	a = tokenShape.ReplaceAllString(a, mask)
	return a
}

// maxDisplay bounds a displayed command line, in runes.
const maxDisplay = 400

// Display is argv redacted and quoted as one line for logs, status and
// doctor: words with spaces or quotes are single-quoted, words with
// control or other unprintable characters are shown escaped, never
// raw, and a line over 400 characters is cut. A process title (one word
// holding spaces, as npm sets it) is shown as ps shows it, its
// space-separated parts each quoted as a word; a program path with a
// space and no arguments is shown the same way.
func Display(argv []string) string {
	var b strings.Builder
	words := Redact(argv)
	title := isTitle(argv)
	if title {
		words = strings.Split(words[0], " ")
	}
	for i, a := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a == "" && title {
			continue // a double space of the title
		}
		b.WriteString(quote(a))
	}
	s := b.String()
	if utf8.RuneCountInString(s) > maxDisplay {
		r := []rune(s)
		s = string(r[:maxDisplay]) + "…"
	}
	return s
}

// quote shows a word so that a terminal prints it as text.
func quote(a string) string {
	if a == "" {
		return "''"
	}
	valid := utf8.ValidString(a)
	plain, printable := valid, valid
	for _, r := range a {
		switch {
		case r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_@%+=:,./-*", r)):
		case r >= 0x80 && unicode.IsGraphic(r) && !unicode.IsSpace(r):
		case unicode.IsGraphic(r): // a space too
			plain = false
		default:
			plain, printable = false, false
		}
	}
	switch {
	case plain:
		return a
	case printable:
		return shellquote.Quote(a) // every character that is not plain is special to a shell
	default:
		return strconv.QuoteToGraphic(a)
	}
}
