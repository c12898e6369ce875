package service

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// parsePlist parses an XML property list (Apple's DTD 1.0) into Go
// values: map[string]any, []any, string, int64, bool. It is strict: one
// <plist version="1.0"> root holding one value, dict keys and values
// alternating, nothing but whitespace and comments between elements.
func parsePlist(b []byte) (any, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	var root any
	seenDoctype := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.Directive:
			if !strings.HasPrefix(string(t), `DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN"`) {
				return nil, fmt.Errorf("doctype %q", t)
			}
			seenDoctype = true
		case xml.StartElement:
			if root != nil || t.Name.Local != "plist" {
				return nil, fmt.Errorf("root element %q", t.Name.Local)
			}
			if len(t.Attr) != 1 || t.Attr[0].Name.Local != "version" || t.Attr[0].Value != "1.0" {
				return nil, fmt.Errorf("plist attributes %v", t.Attr)
			}
			v, err := plistValue(d, nil)
			if err != nil {
				return nil, err
			}
			if end, err := nextElement(d); err != nil || end != nil {
				return nil, fmt.Errorf("plist holds more than one value: %v %v", end, err)
			}
			root = v
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return nil, fmt.Errorf("text outside elements: %q", t)
			}
		}
	}
	if !seenDoctype || root == nil {
		return nil, errors.New("no doctype or no plist")
	}
	return root, nil
}

// nextElement returns the next start element, or nil at an end element.
func nextElement(d *xml.Decoder) (*xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return &t, nil
		case xml.EndElement:
			return nil, nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return nil, fmt.Errorf("stray text %q", t)
			}
		case xml.Comment:
		default:
			return nil, fmt.Errorf("unexpected %T", t)
		}
	}
}

// plistValue reads one value; start is its element, or nil to read it.
func plistValue(d *xml.Decoder, start *xml.StartElement) (any, error) {
	if start == nil {
		var err error
		if start, err = nextElement(d); err != nil {
			return nil, err
		}
		if start == nil {
			return nil, errors.New("missing value")
		}
	}
	text := func() (string, error) {
		var s string
		err := d.DecodeElement(&s, start)
		return s, err
	}
	switch start.Name.Local {
	case "string":
		return text()
	case "integer":
		s, err := text()
		if err != nil {
			return nil, err
		}
		return strconv.ParseInt(s, 10, 64)
	case "true", "false":
		if err := d.Skip(); err != nil {
			return nil, err
		}
		return start.Name.Local == "true", nil
	case "array":
		out := []any{}
		for {
			el, err := nextElement(d)
			if err != nil {
				return nil, err
			}
			if el == nil {
				return out, nil
			}
			v, err := plistValue(d, el)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	case "dict":
		out := map[string]any{}
		for {
			el, err := nextElement(d)
			if err != nil {
				return nil, err
			}
			if el == nil {
				return out, nil
			}
			if el.Name.Local != "key" {
				return nil, fmt.Errorf("dict: <%s> where a <key> belongs", el.Name.Local)
			}
			var k string
			if err := d.DecodeElement(&k, el); err != nil {
				return nil, err
			}
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("dict: key %q twice", k)
			}
			v, err := plistValue(d, nil)
			if err != nil {
				return nil, fmt.Errorf("dict key %q: %w", k, err)
			}
			out[k] = v
		}
	}
	return nil, fmt.Errorf("unknown element <%s>", start.Name.Local)
}

func renderPlist(t testing.TB, env Env, spec Spec) map[string]any {
	t.Helper()
	m, err := New(env)
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.p.render(spec)
	if err != nil {
		t.Fatal(err)
	}
	v, err := parsePlist(f.Content)
	if err != nil {
		t.Fatalf("plist does not parse: %v\n%s", err, f.Content)
	}
	d, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("plist root is %T", v)
	}
	return d
}

// TestPlistParsesBackAsTheAgent parses the rendered plist as a property
// list and checks every key launchd reads: the label, the exact argument
// vector (odd characters intact), start at load, restart only after a
// failure, the restart delay, logs under ~/Library/Logs/mcp-reconnect,
// the pinned XDG directories and the exit status 0 of a daemon refused as
// a duplicate (which KeepAlive then does not restart), and nothing else.
func TestPlistParsesBackAsTheAgent(t *testing.T) {
	vars := map[string]string{"XDG_STATE_HOME": "/Users/me/state <&> dir", "OPENCODE_SERVER_PASSWORD": "hunter2"}
	env, _ := testEnv(t, "darwin", vars)
	bin := `/Applications/My Tools & "More"/mcp-reconnect <x>`
	config := "/Users/me/.config/mcp-reconnect/config ]]> é.toml"
	got := renderPlist(t, env, Spec{Binary: bin, Config: config})
	logs := filepath.Join(env.Home, "Library", "Logs", "mcp-reconnect", "watch.log")
	want := map[string]any{
		"Label":                Label,
		"ProgramArguments":     []any{bin, "watch", "--config", config},
		"EnvironmentVariables": map[string]any{"XDG_STATE_HOME": "/Users/me/state <&> dir", DuplicateExitEnv: "0"},
		"RunAtLoad":            true,
		"KeepAlive":            map[string]any{"SuccessfulExit": false},
		"ThrottleInterval":     int64(RestartSec),
		"StandardOutPath":      logs,
		"StandardErrorPath":    logs,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plist\n got %#v\nwant %#v", got, want)
	}
	// Without --config and pinned variables, neither appears; the exit
	// status of a refused duplicate always does.
	env2, _ := testEnv(t, "darwin", nil)
	got = renderPlist(t, env2, Spec{Binary: "/usr/local/bin/mcp-reconnect"})
	if !reflect.DeepEqual(got["EnvironmentVariables"], map[string]any{DuplicateExitEnv: "0"}) || !reflect.DeepEqual(got["ProgramArguments"], []any{"/usr/local/bin/mcp-reconnect", "watch"}) {
		t.Fatalf("plain plist %#v", got)
	}
}

func TestPlistPathAndCommands(t *testing.T) {
	env, _ := testEnv(t, "darwin", nil)
	m := mustNew(t, env)
	pl, err := m.Plan(Spec{Binary: "/usr/local/bin/mcp-reconnect"}, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(env.Home, "Library", "LaunchAgents", "dev.mcp-reconnect.watch.plist"); pl.Files[0].Path != want || pl.Files[0].Mode != 0o644 {
		t.Fatalf("plist file %s %v", pl.Files[0].Path, pl.Files[0].Mode)
	}
	if want := [][]string{{"launchctl", "bootstrap", "gui/501", pl.Files[0].Path}}; !reflect.DeepEqual(pl.Commands, want) {
		t.Fatalf("commands %q", pl.Commands)
	}
	logDir := filepath.Join(env.Home, "Library", "Logs", "mcp-reconnect")
	found := false
	for _, d := range pl.MkDirs {
		found = found || d == logDir
	}
	if !found {
		t.Fatalf("the log directory is not created (launchd does not create it): %q", pl.MkDirs)
	}
	if want := [][]string{{"launchctl", "bootout", "gui/501/dev.mcp-reconnect.watch"}}; !reflect.DeepEqual(m.p.stopCommands(), want) {
		t.Fatalf("stop %q", m.p.stopCommands())
	}
	if got := m.p.installCommands(true); len(got) != 2 || got[0][1] != "bootout" {
		t.Fatalf("re-install must boot the old agent out first (bootstrap refuses a loaded label): %q", got)
	}
}

// The parser is strict enough to be worth trusting.
func TestParsePlistRejects(t *testing.T) {
	head := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">` + "\n"
	for _, bad := range []string{
		head + `<plist version="1.0"><dict><key>a</key></dict></plist>`,
		head + `<plist version="1.0"><dict><string>a</string><string>b</string></dict></plist>`,
		head + `<plist version="1.0"><dict><key>a</key><string>x</string><key>a</key><string>y</string></dict></plist>`,
		head + `<plist version="1.0"><dict></dict><dict></dict></plist>`,
		head + `<plist version="1.0"><dict><key>a</key><string>x</dict></plist>`,
		head + `<plist version="1.0"><dict><key>a</key><integer>five</integer></dict></plist>`,
		`<plist version="1.0"><dict/></plist>`,
	} {
		if _, err := parsePlist([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// FuzzPlistRoundTrip: any binary and config path install accepts comes
// back from the plist unchanged.
func FuzzPlistRoundTrip(f *testing.F) {
	f.Add("/usr/local/bin/mcp-reconnect", "")
	f.Add("/a & b/<c>", "/d ]]> \"e\" 'f'.toml")
	f.Add("/x\x00y", "")
	f.Add("/x\ufffey", "")
	f.Fuzz(func(t *testing.T, bin, config string) {
		env := Env{GOOS: "darwin", Home: "/Users/me", UID: 501, Getenv: func(string) string { return "" }}
		spec := Spec{Binary: bin, Config: config}
		if spec.validate() != nil {
			return
		}
		m, _ := New(env)
		file, err := m.p.render(spec)
		if err != nil {
			t.Fatal(err)
		}
		v, err := parsePlist(file.Content)
		if err != nil {
			t.Fatalf("%v\n%s", err, file.Content)
		}
		args := v.(map[string]any)["ProgramArguments"]
		want := []any{}
		for _, a := range spec.Args() {
			want = append(want, a)
		}
		if !reflect.DeepEqual(args, want) {
			t.Fatalf("arguments %q, want %q", args, want)
		}
	})
}
