package procview

import "strings"

// What procview reads of a `sh -c` script: the words of its commands
// when they are literal, the `cd`s before the last one, and whether the
// shell exits with that last command. Anything it cannot know without
// running a shell (an expansion, a glob, a substitution) leaves the
// command unknown, never guessed.

// shellToken is a word or an operator of a script.
type shellToken struct {
	word string
	// op is an operator (";", "&&", "|", ">", "(" ...); word is then "".
	op string
	// unknown: the word has an expansion, a substitution or a glob.
	unknown bool
}

// tokenize splits a POSIX shell script into words and operators. ok is
// false for a script it cannot split (an unterminated quote).
func tokenize(s string) (toks []shellToken, ok bool) {
	var cur strings.Builder
	inWord, unknown := false, false
	flush := func() {
		if inWord {
			toks = append(toks, shellToken{word: cur.String(), unknown: unknown})
		}
		cur.Reset()
		inWord, unknown = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '\n':
			flush()
			toks = append(toks, shellToken{op: ";"})
		case c == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
			i--
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(s) {
					return nil, false
				}
				d := s[i]
				if d == '"' {
					break
				}
				if d == '$' || d == '`' {
					unknown = true
				}
				if d == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
					d = s[i]
				}
				cur.WriteByte(d)
			}
		case c == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
					inWord = true
				}
			}
		case strings.IndexByte(";&|()<>", c) >= 0:
			// A redirection's file descriptor (2>) belongs to it.
			if (c == '<' || c == '>') && inWord && !unknown && strings.Trim(cur.String(), "0123456789") == "" {
				cur.Reset()
				inWord = false
			}
			flush()
			op := string(c)
			if i+1 < len(s) {
				switch two := s[i : i+2]; two {
				case "&&", "||", ";;", ">>", ">&", "<&", "<<", "&>", ">|", "<>":
					op = two
					i++
				}
			}
			toks = append(toks, shellToken{op: op})
		default:
			if c == '$' || c == '`' || c == '*' || c == '?' || c == '[' || c == '~' && !inWord {
				unknown = true
			}
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks, true
}

// splitWords splits a string into literal words as a shell would (env
// -S); ok is false when it holds anything but words.
func splitWords(s string) ([]string, bool) {
	toks, ok := tokenize(s)
	if !ok {
		return nil, false
	}
	words := make([]string, 0, len(toks))
	for _, t := range toks {
		if t.op != "" || t.unknown {
			return nil, false
		}
		words = append(words, t.word)
	}
	return words, true
}

// shellReserved are the words that make a command compound.
var shellReserved = setOf(`if then else elif fi do done case esac while until for in
	function select { } ! [[ ]] time coproc`)

// shellPrep are builtins that prepare the environment of the command
// after them and run no program.
var shellPrep = setOf(`cd export unset set umask ulimit source . true : shopt alias trap
	readonly local hash`)

// shellScript is what procview knows of a script.
type shellScript struct {
	// last is the last command's words, nil when not literal.
	last []string
	// dir is where the last command runs, after the literal cds before
	// it ("" for the shell's own directory); dirUnknown for a cd to an
	// expansion.
	dir        string
	dirUnknown bool
	// simple: preparation builtins, then one command in the foreground.
	// The shell exits when that command does.
	simple bool
}

// readScript reads a `sh -c` script.
func readScript(script string) shellScript {
	toks, ok := tokenize(script)
	if !ok {
		return shellScript{}
	}
	var out shellScript
	var cmds [][]shellToken
	var cur []shellToken
	for _, t := range append(toks, shellToken{op: ";"}) { // the last ";" ends the last command
		switch t.op {
		case "":
			cur = append(cur, t)
		case ";", "&&", "||":
			if len(cur) > 0 {
				cmds = append(cmds, cur)
			}
			cur = nil
		case "<", ">", ">>", ">&", "<&", "&>", ">|", "<>":
			cur = append(cur, t)
		default: // a pipe, a background job, a subshell, a here-document
			return shellScript{}
		}
	}
	if len(cmds) == 0 {
		return shellScript{}
	}
	for n, c := range cmds {
		words, known := commandWords(c)
		if len(words) > 0 && shellReserved[words[0]] {
			return shellScript{}
		}
		if n == len(cmds)-1 {
			out.simple = true
			if len(words) > 0 && words[0] == "exec" {
				words = words[1:]
				if len(words) > 0 && isOption(words[0]) {
					known = false // exec -a NAME changes argv[0]
				}
			}
			if known && len(words) > 0 {
				out.last = words
			}
			break
		}
		if len(words) == 0 {
			continue // assignments only
		}
		if !shellPrep[words[0]] {
			return shellScript{} // two programs: which is the server?
		}
		if words[0] == "cd" {
			if !known || len(words) != 2 || words[1] == "-" {
				out.dirUnknown = true
			} else {
				out.dir = joinDir(out.dir, words[1])
			}
		}
	}
	return out
}

// commandWords is a simple command's words without its leading
// assignments and its redirections; known is false when one of them is
// not literal.
func commandWords(c []shellToken) (words []string, known bool) {
	known = true
	lead := true
	for i := 0; i < len(c); i++ {
		t := c[i]
		if t.op != "" {
			i++ // the redirection's target
			continue
		}
		if lead && !t.unknown && isAssignment(t.word) {
			continue
		}
		lead = false
		known = known && !t.unknown
		words = append(words, t.word)
	}
	return words, known
}

// parseShell reads `sh [options] -c SCRIPT [NAME ARGS...]`: the shell
// runs SCRIPT's commands as its children, execs the last one (bash) or
// not (dash), and exits when it ends. A shell running a script file
// (`bash run.sh`) runs an unknown script: a launcher that may not exit
// with its server.
func parseShell(prog string, args []string) (launch, bool) {
	if prog == "busybox" {
		if len(args) == 0 || args[0] != "sh" && args[0] != "ash" {
			return launch{}, false
		}
		prog, args = args[0], args[1:]
	}
	sawC := false
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' && a[0] != '+' {
			break
		}
		switch {
		case a == "-o" || a == "+o" || a == "--rcfile" || a == "--init-file":
			i++
		case !strings.HasPrefix(a, "--") && strings.ContainsRune(a, 'c'):
			sawC = true
		}
	}
	if i >= len(args) {
		return launch{}, false // an interactive shell
	}
	if !sawC {
		return launch{name: prog + " script", mode: spawns}, true
	}
	s := readScript(args[i])
	return launch{name: prog + " -c", mode: spawns, next: s.last, dir: s.dir, dirUnknown: s.dirUnknown, exits: s.simple}, true
}
