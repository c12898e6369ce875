package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Docs are the completion scripts and manual pages the binary prints of
// itself; the same for every platform (cobra's scripts ask the binary at
// completion time, and the pages are the --help text).
type Docs struct {
	// Completions maps a shell (bash, zsh, fish) to its script.
	Completions map[string][]byte
	// Man maps a page's file name (mcp-reconnect-watch.1) to the page.
	Man map[string][]byte
}

// Shells are the shells completions are shipped for, each with where its
// script goes: in an archive (below its top directory, where the formula
// looks), in a .deb and in an .rpm (the directories each distribution's
// shell reads: Debian's zsh reads vendor-completions, Fedora's
// site-functions).
var Shells = []struct{ Shell, Archive, Deb, RPM string }{
	{"bash", "completions/mcp-reconnect.bash", "/usr/share/bash-completion/completions/mcp-reconnect", "/usr/share/bash-completion/completions/mcp-reconnect"},
	{"fish", "completions/mcp-reconnect.fish", "/usr/share/fish/vendor_completions.d/mcp-reconnect.fish", "/usr/share/fish/vendor_completions.d/mcp-reconnect.fish"},
	{"zsh", "completions/_mcp-reconnect", "/usr/share/zsh/vendor-completions/_mcp-reconnect", "/usr/share/zsh/site-functions/_mcp-reconnect"},
}

// docsHome is the home the binary is run with: flag defaults derived from
// it (the config file's path, the OpenCode 2 service file) then read as
// a user reads them, ~/.config/mcp-reconnect/config.toml, whoever builds.
const docsHome = "~"

// docsEnv is the whole environment the binary runs in: nothing of the
// builder's (no XDG variable, no locale, no HOME of theirs).
func docsEnv(created time.Time) []string {
	return []string{"HOME=" + docsHome, "SOURCE_DATE_EPOCH=" + strconv.FormatInt(created.Unix(), 10), "LC_ALL=C", "TZ=UTC"}
}

// GenerateDocs runs bin (`completion SHELL`, `man DIR`) for the docs.
// created is the commit's time, the manual pages' date.
func GenerateDocs(ctx context.Context, bin string, created time.Time) (Docs, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return Docs{}, err
	}
	d := Docs{Completions: map[string][]byte{}, Man: map[string][]byte{}}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, abs, args...)
		cmd.Env = docsEnv(created)
		cmd.Dir = "/"
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w (a binary of this machine's platform is needed)\n%s", bin, strings.Join(args, " "), err, stderr.Bytes())
		}
		return out, nil
	}
	for _, s := range Shells {
		out, err := run("completion", s.Shell)
		if err != nil {
			return Docs{}, err
		}
		if len(out) == 0 {
			return Docs{}, fmt.Errorf("%s completion %s printed nothing", bin, s.Shell)
		}
		d.Completions[s.Shell] = out
	}
	dir, err := os.MkdirTemp("", "distpkg-man-")
	if err != nil {
		return Docs{}, err
	}
	defer os.RemoveAll(dir)
	if _, err := run("man", dir); err != nil {
		return Docs{}, err
	}
	pages, err := filepath.Glob(filepath.Join(dir, "*.1"))
	if err != nil {
		return Docs{}, err
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			return Docs{}, err
		}
		d.Man[filepath.Base(p)] = b
	}
	if d.Man["mcp-reconnect.1"] == nil {
		return Docs{}, fmt.Errorf("%s man %s wrote no mcp-reconnect.1 (%d pages)", bin, dir, len(pages))
	}
	// What the pages must not hold: where they were generated, and whose.
	local := []string{dir}
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		local = append(local, home+"/")
	}
	for name, b := range d.all() {
		for _, p := range local {
			if bytes.Contains(b, []byte(p)) {
				return Docs{}, fmt.Errorf("%s holds the local path %s", name, p)
			}
		}
	}
	return d, nil
}

// all is every doc by a name for messages.
func (d Docs) all() map[string][]byte {
	out := map[string][]byte{}
	for sh, b := range d.Completions {
		out["completion "+sh] = b
	}
	for name, b := range d.Man {
		out[name] = b
	}
	return out
}

// manPages are the pages' names, sorted.
func (d Docs) manPages() []string {
	names := make([]string, 0, len(d.Man))
	for n := range d.Man {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (d Docs) validate() error {
	if len(d.Man) == 0 {
		return errors.New("no manual pages")
	}
	for _, s := range Shells {
		if len(d.Completions[s.Shell]) == 0 {
			return fmt.Errorf("no %s completion", s.Shell)
		}
	}
	return nil
}
