package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The notices: THIRD_PARTY_NOTICES, shipped beside LICENSE in every
// archive, package, image and npm package. It names each module the SBOM
// says the binaries link (the Go standard library too) and reproduces the
// licence files the module ships: LICENSE, COPYING, NOTICE, PATENTS and
// the like at its top, as they are, read from the module cache (`go mod
// download -json`, whose go.sum hash must be the one in the binaries'
// build record: the text comes from the code that was linked). Sorted,
// and with no path of this machine, so the same binaries give the same
// bytes.

// noticeModule is one linked module and where its files are.
type noticeModule struct {
	Path, Version string
	Dir           string // its source, in the module cache (GOROOT for stdlib)
}

// licenceFile is a file the notices reproduce; licenceText one that is a
// licence (a module must ship at least one).
var (
	licenceFile = regexp.MustCompile(`^(?i)(licen[cs]e|copying|copyright|unlicense|notice|patents)([._-].*)?$`)
	licenceText = regexp.MustCompile(`^(?i)(licen[cs]e|copying|unlicense)`)
)

// Notices writes the notices of what bins link, with goCmd finding each
// module's files.
func Notices(ctx context.Context, goCmd string, bins []Binary) ([]byte, error) {
	mods, err := noticeModules(ctx, goCmd, bins)
	if err != nil {
		return nil, err
	}
	return renderNotices(mods)
}

// noticeModules are the modules bins link, sorted, stdlib first, with
// their directories.
func noticeModules(ctx context.Context, goCmd string, bins []Binary) ([]noticeModule, error) {
	if len(bins) == 0 {
		return nil, errors.New("no binaries")
	}
	goVersion := bins[0].Info.GoVersion
	sums := map[string]string{} // path@version → go.sum hash
	for _, b := range bins {
		if b.Info.GoVersion != goVersion {
			return nil, fmt.Errorf("%s is built with %s, %s with %s", b.Name, b.Info.GoVersion, bins[0].Name, goVersion)
		}
		for _, d := range b.Info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			sums[d.Path+"@"+d.Version] = d.Sum
		}
	}
	out, err := exec.CommandContext(ctx, goCmd, "env", "GOROOT", "GOVERSION").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	env := strings.Fields(string(out))
	if len(env) != 2 || env[1] != goVersion {
		return nil, fmt.Errorf("go env says %q; the binaries are built with %s: its licence is the one to ship", out, goVersion)
	}
	mods := []noticeModule{{Path: "stdlib", Version: goVersion, Dir: env[0]}}
	if len(sums) == 0 {
		return mods, nil
	}
	args := []string{"mod", "download", "-json"}
	for m := range sums {
		args = append(args, m)
	}
	sort.Strings(args[3:])
	cmd := exec.CommandContext(ctx, goCmd, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download: %w\n%s%s", err, stderr.Bytes(), out)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m struct{ Path, Version, Dir, Sum, Error string }
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go mod download -json: %w", err)
		}
		want := sums[m.Path+"@"+m.Version]
		switch {
		case m.Error != "":
			return nil, fmt.Errorf("%s %s: %s", m.Path, m.Version, m.Error)
		case want != "" && m.Sum != want:
			return nil, fmt.Errorf("%s %s: the module cache has %s, the binaries were built from %s", m.Path, m.Version, m.Sum, want)
		}
		mods = append(mods, noticeModule{Path: m.Path, Version: m.Version, Dir: m.Dir})
	}
	if len(mods) != len(sums)+1 {
		return nil, fmt.Errorf("go mod download gave %d modules of %d", len(mods)-1, len(sums))
	}
	rest := mods[1:]
	sort.Slice(rest, func(i, j int) bool { return rest[i].Path+" "+rest[i].Version < rest[j].Path+" "+rest[j].Version })
	return mods, nil
}

const rule = "================================================================================\n"

// renderNotices is the file: a list of the modules, then each module's
// licence files.
func renderNotices(mods []noticeModule) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("THIRD_PARTY_NOTICES\n\nThe mcp-reconnect binary links the Go standard library and the Go modules\nbelow, each under its own licence, reproduced here as the module ships it:\n\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "  %s %s\n", m.Path, m.Version)
	}
	for _, m := range mods {
		ents, err := os.ReadDir(m.Dir)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", m.Path, m.Version, err)
		}
		var names []string
		licence := false
		for _, e := range ents {
			if e.Type().IsRegular() && licenceFile.MatchString(e.Name()) {
				names = append(names, e.Name())
				licence = licence || licenceText.MatchString(e.Name())
			}
		}
		if !licence {
			return nil, fmt.Errorf("%s %s ships no licence file (LICENSE, COPYING) in %s", m.Path, m.Version, m.Dir)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "\n%s%s %s\n%s", rule, m.Path, m.Version, rule)
		for _, name := range names {
			text, err := os.ReadFile(filepath.Join(m.Dir, name))
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\n--- %s\n\n%s", name, text)
			if !bytes.HasSuffix(text, []byte("\n")) {
				b.WriteString("\n")
			}
		}
	}
	return b.Bytes(), nil
}
