package opencode

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// jscan walks JSON text without decoding it, so that ParseEvent can pick the
// few fields it needs out of an event and pass over the rest (a streaming
// reply's message.part.updated carries the whole text so far, hundreds of
// kilobytes, many times a second) without building anything.
//
// It checks what it walks only as far as finding where each value ends
// needs: strings end at an unescaped quote and brackets must match, but the
// grammar inside a skipped value is not checked. The events come from
// OpenCode's own JSON encoder; the fields that matter are decoded exactly.
type jscan struct {
	b   []byte
	i   int
	bad bool
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, or 0 at the end.
func (s *jscan) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// open enters an object.
func (s *jscan) open() bool {
	if s.peek() != '{' {
		s.bad = true
		return false
	}
	s.i++
	return true
}

// member moves to the next member of the object entered with open and
// returns its key, unquoted; the caller then reads
// or skips the value. It returns false at the closing brace or when the
// text is malformed (bad is set). first must start true for each object.
func (s *jscan) member(first *bool) ([]byte, bool) {
	if s.bad {
		return nil, false
	}
	c := s.peek()
	if c == '}' {
		s.i++
		return nil, false
	}
	if (c == ',') == *first { // a comma before the first member, or none before a later one
		s.bad = true
		return nil, false
	}
	if c == ',' {
		s.i++
	}
	*first = false
	if s.peek() != '"' {
		s.bad = true
		return nil, false
	}
	start := s.i
	if !s.str() {
		return nil, false
	}
	key := s.b[start+1 : s.i-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		k, ok := jsonString(s.b[start:s.i]) // rare: decoded, so keys match as encoding/json matches them
		if !ok {
			s.bad = true
			return nil, false
		}
		key = []byte(k)
	}
	if s.peek() != ':' {
		s.bad = true
		return nil, false
	}
	s.i++
	return key, true
}

// str passes over the string that starts at s.i.
func (s *jscan) str() bool {
	j := s.i + 1
	for {
		q := bytes.IndexByte(s.b[j:], '"')
		if q < 0 {
			s.bad = true
			return false
		}
		j += q
		// The quote is escaped when an odd run of backslashes precedes it.
		k := j
		for s.b[k-1] == '\\' {
			k--
		}
		j++
		if (j-1-k)%2 == 0 {
			s.i = j
			return true
		}
	}
}

// skip passes over one value and returns its text.
func (s *jscan) skip() []byte {
	if s.bad {
		return nil
	}
	var stackBuf [32]byte
	stack := stackBuf[:0] // the closing brackets expected, innermost last
	start := -1
	for {
		c := s.peek()
		if start < 0 {
			start = s.i
		}
		switch c {
		case 0:
			s.bad = true
			return nil
		case '"':
			if !s.str() {
				return nil
			}
		case '{':
			stack = append(stack, '}')
			s.i++
		case '[':
			stack = append(stack, ']')
			s.i++
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				s.bad = true
				return nil
			}
			stack = stack[:len(stack)-1]
			s.i++
		case ',', ':':
			if len(stack) == 0 {
				s.bad = true
				return nil
			}
			s.i++
		default: // a number, true, false or null
			j := s.i
			for j < len(s.b) && isLiteral(s.b[j]) {
				j++
			}
			if j == s.i {
				s.bad = true
				return nil
			}
			s.i = j
		}
		if len(stack) == 0 {
			return s.b[start:s.i]
		}
	}
}

func isLiteral(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.'
}

// jsonString decodes a JSON string value; ok is false for anything else.
// A plain ASCII string (every one OpenCode sends for a type, and most
// paths and server names) is taken as is.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if !slices.ContainsFunc(inner, func(c byte) bool { return c < 0x20 || c == '\\' || c >= utf8.RuneSelf }) {
		return string(inner), true
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}
