package procview

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"mcp-remote", "https://x/mcp", "--header", "Authorization: Bearer abc.def"}, []string{"mcp-remote", "https://x/mcp", "--header", "Authorization: ***"}},
		{[]string{"curl", "-H", "X-Api-Key:k123"}, []string{"curl", "-H", "X-Api-Key: ***"}},
		{[]string{"srv", "--header=Cookie: a=b"}, []string{"srv", "--header=Cookie: ***"}},
		{[]string{"srv", "-H", "nocolon"}, []string{"srv", "-H", "***"}},
		{[]string{"srv", "--token", "s3cr3t", "--verbose"}, []string{"srv", "--token", "***", "--verbose"}},
		{[]string{"srv", "--api-key=s3cr3t"}, []string{"srv", "--api-key=***"}},
		{[]string{"srv", "--password", "--next"}, []string{"srv", "--password", "--next"}},
		{[]string{"env", "GITHUB_TOKEN=ghp_x", "PATH=/bin", "srv"}, []string{"env", "GITHUB_TOKEN=***", "PATH=/bin", "srv"}},
		{[]string{"srv", "https://ana:hunter2@example.com/mcp?api_key=k&x=1"}, []string{"srv", "https://ana:***@example.com/mcp?api_key=***&x=1"}},
		{[]string{"srv", "-name", "Authorization: Bearer sekrit"}, []string{"srv", "-name", "Authorization: ***"}},
		{[]string{"srv", "Bearer abcdefghij"}, []string{"srv", "Bearer ***"}},
		{[]string{"srv", "ghp_abcdefghijklmnopqrstuvwxyz0123", "sk-proj-abcdefghijklmnopqrstuv", "AKIAABCDEFGHIJKLMNOP"}, []string{"srv", "***", "***", "***"}},
		{[]string{"node", "/Users/ana/my projéct/srv.js", "--name", "café au lait", "-transport", "stdio"}, []string{"node", "/Users/ana/my projéct/srv.js", "--name", "café au lait", "-transport", "stdio"}},
		{nil, nil},
	} {
		if got := Redact(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Redact(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestDisplay(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"node", "srv.js", "--name", "café au lait"}, "node srv.js --name 'café au lait'"},
		{[]string{"sh", "-c", "echo 'hi'; rm x"}, `sh -c 'echo '\''hi'\''; rm x'`},
		{[]string{"srv", "\x1b]0;owned\x07", "a\nb"}, `srv "\x1b]0;owned\a" "a\nb"`},
		{[]string{"srv", "\u202eevil"}, `srv "\u202eevil"`},
		{[]string{"srv", ""}, "srv ''"},
		{[]string{"srv", "\xff"}, `srv "\xff"`},
	} {
		if got := Display(c.in); got != c.want {
			t.Errorf("Display(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	long := Display([]string{strings.Repeat("é", 1000)})
	if n := len([]rune(long)); n != maxDisplay+1 {
		t.Errorf("a long line shows %d runes", n)
	}
}

// Whatever argv holds, Display prints no control character, and the
// value after a header flag never survives.
func FuzzDisplay(f *testing.F) {
	f.Add("srv", "--header", "Authorization: Bearer abc")
	f.Add("node", "café au lait", "\x1b[2J")
	f.Add("x", "-H", "k")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		out := Display([]string{a, b, c})
		for _, r := range out {
			if unicode.IsControl(r) || (!unicode.IsGraphic(r) && r != ' ') {
				t.Fatalf("Display(%q %q %q) = %q holds %U", a, b, c, out, r)
			}
		}
		if headerFlag[b] && len(c) > 3 && !strings.Contains(c, ":") && strings.Contains(out, c) && !strings.Contains(a+b, c) {
			t.Fatalf("the value of %s survived: %q", b, out)
		}
	})
}

// A child, an event, a snapshot or an orphan printed or logged whole
// never shows an argv secret.
func TestSecretsNeverPrinted(t *testing.T) {
	v := newView(t, openTable(t, filepath.Join("testdata", "synthetic")), 2000, syntheticServers())
	s := scan(t, v)
	c, _ := s.Child(Key{other, "proxy"})
	orphans, err := Orphans(openTable(t, filepath.Join("testdata", "synthetic")), configured(syntheticServers()), Scope{UID: ana, Watched: []int{2000}})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("child", "child", c)
	log.Info("snapshot", "servers", s.Servers)
	printed := fmt.Sprintf("%+v %v %+v %#v %+v", c, s, s.Servers, orphans, s) + logs.String()
	for _, secret := range []string{"ghp_abcdefghijklmnopqrstuvwxyz0123", "Bearer ghp"} {
		if strings.Contains(printed, secret) {
			t.Fatalf("%q printed", secret)
		}
	}
	if !strings.Contains(logs.String(), `"command":"/usr/local/bin/mcp-proxy --header 'Authorization: ***' https://mcp.example.com/x"`) {
		t.Fatalf("a logged child shows no masked command: %s", logs.String())
	}
}

// A retitled cmdline (one word, then NULs) reads as the word; it is shown as ps shows it, secrets masked as in the
// command line it stands for.
func TestRetitledCommandLine(t *testing.T) {
	if got := parseCmdline([]byte("npm exec ./pkg a --flag x\x00\x00\x00\x00\x00")); !slices.Equal(got, []string{"npm exec ./pkg a --flag x"}) {
		t.Fatalf("retitled cmdline read as %q", got)
	}
	if got := parseCmdline([]byte("srv\x00\x00")); !slices.Equal(got, []string{"srv"}) {
		t.Fatalf("one word and an empty one read as %q", got)
	}
	if got := parseCmdline([]byte("srv\x00\x00a\x00")); !slices.Equal(got, []string{"srv", "", "a"}) {
		t.Fatalf("an empty argument in the middle read as %q", got)
	}
	for _, c := range []struct{ title, shown string }{
		{"npm exec ./pkg sp ace z", "npm exec ./pkg sp ace z"},
		{"npm exec pkg --api-key sk-abcdefghijklmnopqrstuvwxyz", "npm exec pkg --api-key ***"},
		{"npm exec pkg --password hunter2 --x", "npm exec pkg --password *** --x"},
		{"npm exec pkg -H Authorization: Bearer abcdefgh --port 1", "npm exec pkg -H Authorization: ***"},
		{`npm exec pkg --config {"apiKey": "a b c"}`, `npm exec pkg --config '{"apiKey":' '"***"}'`},
		{"npm exec pkg it's  \x1b[31m", `npm exec pkg 'it'\''s'  "\x1b[31m"`},
	} {
		if got := Display([]string{c.title}); got != c.shown {
			t.Errorf("Display(%q) = %q, want %q", c.title, got, c.shown)
		}
	}
}

// (Orphans and duplicates are shown "with pids and the
// command line minus secrets"; rule 12). Smithery's install line, the way
// many users add stdio MCP servers to OpenCode, passes its API key as
// --key and the server's settings (tokens included) as --config JSON.
// Neither is masked: status, doctor and the debug log print the secrets.
func TestDisplayMasksSmitheryKeyAndJSONConfig(t *testing.T) {
	const key = "0b7c1a52-9e4d-4c1f-8d2a-5b6e7f8a9c0d"
	const pat = "1f2e3d4c5b6a79881726354453627180"
	for _, argv := range [][]string{
		{"npx", "-y", "@smithery/cli@latest", "run", "@upstash/context7-mcp", "--key", key},
		{"npx", "-y", "@smithery/cli@latest", "run", "@smithery-ai/github", "--config", `{"githubPersonalAccessToken":"` + pat + `"}`},
	} {
		out := Display(argv)
		for _, secret := range []string{key, pat} {
			if strings.Contains(out, secret) {
				t.Errorf("Display shows the secret %q: %s", secret, out)
			}
		}
	}
}
