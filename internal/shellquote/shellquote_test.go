package shellquote

import (
	"os"
	"os/exec"
	"testing"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"github":            "github",
		"my server":         "'my server'",
		"":                  "''",
		"it's":              `'it'\''s'`,
		"$(rm -rf ~)":       "'$(rm -rf ~)'",
		"--url=http://h:1/": "--url=http://h:1/",
		"~/x":               "'~/x'",
		"a;b|c&d*e?f":       "'a;b|c&d*e?f'",
		"日本":                "'日本'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Join([]string{"systemctl", "--user", "enable", "--now", "my unit"}); got != "systemctl --user enable --now 'my unit'" {
		t.Errorf("Join = %s", got)
	}
}

// What Quote writes, a shell reads back as the same word.
func FuzzQuoteRoundTrip(f *testing.F) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		if os.Getenv("CI") != "" {
			f.Fatal("no sh under CI")
		}
		f.Skip("no sh")
	}
	for _, s := range []string{"", "a b", "it's", `\"$x`, "~", "-n", "a\nb", "日本", "'''"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range s {
			if r == 0 {
				return // no shell word holds NUL
			}
		}
		out, err := exec.Command(sh, "-c", `printf %s `+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh -c printf %%s %s: %v", Quote(s), err)
		}
		if string(out) != s {
			t.Fatalf("sh read %s as %q, want %q", Quote(s), out, s)
		}
	})
}
