// Package apidesc is the one reader of an OpenCode server's own API
// description (1.x GET /doc, 2.x GET /openapi.json; OpenAPI 3.1 in JSON).
// It answers the questions the daemon asks of a description: which routes
// the server offers, how a route selects its parameters, what its answers
// look like, which values a schema allows. The 2.x client chooses its
// routes from it, and doctor's checks are questions to it.
//
// It reads the document as a plain JSON tree, not into an OpenAPI object
// model (BENCHMARKS.md says why not a library): a question
// follows $ref, anyOf, oneOf, allOf and contentSchema wherever they lead,
// however nested; a cyclic, dangling or external $ref ends that branch of
// the walk; and a part shaped otherwise than OpenAPI says is an empty
// answer, never an error. OpenCode's descriptions are generated (Effect's
// HttpApi on 2.x), so another release may shape a schema differently: the
// caller decides whether an empty answer is a failure.
package apidesc

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// maxDepth bounds how deep a walk goes (cyclic or hostile documents).
const maxDepth = 64

// Doc is a parsed description. It is read-only once parsed, so safe for
// concurrent use; every method of a nil *Doc finds nothing.
type Doc struct {
	root  map[string]any
	paths map[string]any
	// order lists the paths sorted; byTemplate maps a path with its
	// parameter names erased ("/api/mcp/{}/connect") to the paths of
	// that shape, in order.
	order      []string
	byTemplate map[string][]string
}

// ErrCutShort is the error of Parse for a body that ends inside its JSON,
// after its first byte (a connection dropped mid-body, where nothing told
// the body's length): not the server's answer, only the start of one. It
// matches errors.Is.
var ErrCutShort = errors.New("not JSON: the body ends inside it (cut short)")

// Parse decodes an OpenAPI document: a JSON object with a "paths" object.
// Nothing else is required; the errors say which of those it is not (a
// body that ends before its JSON does matches ErrCutShort).
func Parse(b []byte) (*Doc, error) {
	var root any
	if err := json.Unmarshal(b, &root); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se) && len(b) > 0 && se.Offset >= int64(len(b)):
			return nil, ErrCutShort
		case errors.As(err, &se):
			return nil, fmt.Errorf("not JSON (at byte %d)", se.Offset)
		}
		return nil, errors.New("not JSON")
	}
	m, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	paths, ok := m["paths"].(map[string]any)
	if !ok {
		return nil, errors.New(`no "paths" object`)
	}
	d := &Doc{root: m, paths: paths, order: slices.Sorted(maps.Keys(paths)), byTemplate: map[string][]string{}}
	for _, p := range d.order {
		t := Template(p)
		d.byTemplate[t] = append(d.byTemplate[t], p)
	}
	return d, nil
}

// Template erases the parameter names of a path, so that routes compare
// by shape: OpenCode calls the server "{server}" where the client says
// "{name}".
func Template(p string) string {
	segs := strings.Split(strings.TrimSuffix(p, "/"), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") || strings.HasPrefix(s, ":") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

// Paths lists the documented paths, sorted.
func (d *Doc) Paths() []string {
	if d == nil {
		return nil
	}
	return d.order
}

// Offers reports whether the description has an operation for method
// (any case) at path (compared by Template), and the path as documented:
// the first in order of the paths of that shape that has the method.
func (d *Doc) Offers(method, path string) (string, bool) {
	if d == nil {
		return "", false
	}
	for _, p := range d.byTemplate[Template(path)] {
		if d.op(method, p) != nil {
			return p, true
		}
	}
	return "", false
}

func (d *Doc) pathItem(p string) map[string]any {
	m, _ := d.deref(d.paths[p]).(map[string]any)
	return m
}

// op returns the operation of a documented path.
func (d *Doc) op(method, p string) map[string]any {
	for k, v := range d.pathItem(p) {
		if strings.EqualFold(k, method) {
			op, _ := d.deref(v).(map[string]any)
			return op
		}
	}
	return nil
}

// Param is one parameter of a route.
type Param struct {
	// Name, In and Style are the parameter's fields ("" where absent:
	// OpenAPI's default style is form).
	Name, In, Style string
	// Schema is what describes its value: its schema, and the schemas of
	// its content map.
	Schema Schemas
}

// Params lists the parameters of a route (see Offers): the path item's
// and the operation's, $refs resolved.
func (d *Doc) Params(method, path string) []Param {
	p, ok := d.Offers(method, path)
	if !ok {
		return nil
	}
	var out []Param
	for _, holder := range []map[string]any{d.pathItem(p), d.op(method, p)} {
		list, _ := holder["parameters"].([]any)
		for _, x := range list {
			m, ok := d.deref(x).(map[string]any)
			if !ok {
				continue
			}
			pr := Param{Schema: Schemas{d: d}}
			pr.Name, _ = m["name"].(string)
			pr.In, _ = m["in"].(string)
			pr.Style, _ = m["style"].(string)
			if s, ok := m["schema"].(map[string]any); ok {
				pr.Schema.list = append(pr.Schema.list, s)
			}
			content, _ := m["content"].(map[string]any)
			pr.Schema.list = append(pr.Schema.list, contentSchemas(content)...)
			out = append(out, pr)
		}
	}
	return out
}

// Answers returns the schemas of a route's 2xx answers, every status and
// media type in order (an SSE stream's item schema included).
func (d *Doc) Answers(method, path string) Schemas {
	s := Schemas{d: d}
	p, ok := d.Offers(method, path)
	if !ok {
		return s
	}
	responses, _ := d.op(method, p)["responses"].(map[string]any)
	for _, code := range slices.Sorted(maps.Keys(responses)) {
		if !strings.HasPrefix(code, "2") {
			continue
		}
		resp, _ := d.deref(responses[code]).(map[string]any)
		content, _ := resp["content"].(map[string]any)
		s.list = append(s.list, contentSchemas(content)...)
	}
	return s
}

// contentSchemas returns the schemas of an OpenAPI content map, every
// media type in order.
func contentSchemas(content map[string]any) []any {
	var out []any
	for _, t := range slices.Sorted(maps.Keys(content)) {
		mt, _ := content[t].(map[string]any)
		for _, k := range []string{"schema", "itemSchema"} {
			if s, ok := mt[k].(map[string]any); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func (d *Doc) components() map[string]any {
	if d == nil {
		return nil
	}
	comp, _ := d.root["components"].(map[string]any)
	schemas, _ := comp["schemas"].(map[string]any)
	return schemas
}

// ComponentNames lists components.schemas, sorted.
func (d *Doc) ComponentNames() []string {
	return slices.Sorted(maps.Keys(d.components()))
}

// Components returns the named component schemas (those that exist).
func (d *Doc) Components(names ...string) Schemas {
	s := Schemas{d: d}
	schemas := d.components()
	for _, n := range names {
		if v, ok := schemas[n]; ok {
			s.list = append(s.list, v)
		}
	}
	return s
}

// pointer resolves a local JSON pointer ("#/components/schemas/X"); nil
// when it leads nowhere (or elsewhere than this document).
func (d *Doc) pointer(ref string) any {
	rest, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	if u, err := url.PathUnescape(rest); err == nil {
		rest = u
	}
	var cur any = d.root
	if rest == "" {
		return cur
	}
	if !strings.HasPrefix(rest, "/") {
		return nil
	}
	for _, tok := range strings.Split(rest[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// deref follows a chain of $refs (a cycle gives nil).
func (d *Doc) deref(v any) any {
	for range maxDepth {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		v = d.pointer(ref)
	}
	return nil
}

// Schemas is a set of schemas a value may match: a question's answer and
// the start of the next question.
type Schemas struct {
	d    *Doc
	list []any
}

// Len is how many schemas the set holds (before expanding them).
func (s Schemas) Len() int { return len(s.list) }

// Join is the union of two sets of one document.
func (s Schemas) Join(o Schemas) Schemas {
	if s.d == nil {
		s.d = o.d
	}
	s.list = append(s.list[:len(s.list):len(s.list)], o.list...)
	return s
}

// variants returns the object schemas the set's schemas may be: each
// itself and, recursively, its $ref, anyOf, oneOf and allOf members and
// the contentSchema of a JSON-encoded string. Each $ref is expanded once,
// so a cyclic or repetitive document costs no more than its size.
func (s Schemas) variants() []map[string]any {
	seen := map[string]bool{}
	var out []map[string]any
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > maxDepth {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			if !seen[ref] {
				seen[ref] = true
				walk(s.d.pointer(ref), depth+1)
			}
			return
		}
		out = append(out, m)
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			list, _ := m[k].([]any)
			for _, x := range list {
				walk(x, depth+1)
			}
		}
		if c, ok := m["contentSchema"]; ok {
			walk(c, depth+1)
		}
	}
	for _, v := range s.list {
		walk(v, 0)
	}
	return out
}

// Property returns the schemas of a property, across every variant.
func (s Schemas) Property(name string) Schemas {
	out := Schemas{d: s.d}
	for _, v := range s.variants() {
		props, _ := v["properties"].(map[string]any)
		if p, ok := props[name]; ok {
			out.list = append(out.list, p)
		}
	}
	return out
}

// Items returns the item schemas of every array variant (items and
// prefixItems).
func (s Schemas) Items() Schemas {
	out := Schemas{d: s.d}
	for _, v := range s.variants() {
		if it, ok := v["items"].(map[string]any); ok {
			out.list = append(out.list, it)
		}
		prefix, _ := v["prefixItems"].([]any)
		out.list = append(out.list, prefix...)
	}
	return out
}

// Literals returns the string values the set allows by enum or const,
// each once, in the order found.
func (s Schemas) Literals() []string {
	var out []string
	seen := map[string]bool{}
	add := func(x any) {
		if v, ok := x.(string); ok && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, v := range s.variants() {
		add(v["const"])
		list, _ := v["enum"].([]any)
		for _, x := range list {
			add(x)
		}
	}
	return out
}
