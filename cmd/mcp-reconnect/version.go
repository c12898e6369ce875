package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version, commit and date are stamped by `make release`
// (-ldflags "-X main.version=… -X main.commit=… -X main.date=…"). A plain
// `go build` or `go install` leaves them empty, and what the Go toolchain
// recorded in the binary (debug.ReadBuildInfo) is shown instead.
var version, commit, date string

// buildInfo is what `mcp-reconnect version` reports.
type buildInfo struct {
	Version  string // v1.2.3, a pseudo-version, or "(devel)"
	Commit   string // full revision, or ""
	Date     string // RFC 3339 commit or build time, or ""
	Modified bool   // built from a work tree with uncommitted changes
	Go       string // toolchain, GOOS/GOARCH
}

// currentBuild merges the stamped values with the toolchain's record:
// stamped values win; the rest comes from the module version and the
// vcs.* settings when the build had them (go build -buildvcs in a git
// checkout; `go install module@version` has a version but no vcs.*).
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: date,
		Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		b.Version = cmp.Or(b.Version, bi.Main.Version)
	}
	b.Version = cmp.Or(b.Version, "(devel)")
	if !ok || commit != "" {
		// A release: its stamped commit and date are the truth.
		return b
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Date = cmp.Or(b.Date, s.Value)
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// versionString is the one-word version the daemon reports in its status
// and registry entry.
func versionString() string { return currentBuild().Version }

func (b buildInfo) write(w io.Writer) {
	fmt.Fprintln(w, "mcp-reconnect", b.Version)
	c := b.Commit
	switch {
	case c == "":
		c = "unknown (built without version control information)"
	case b.Modified:
		c += " (with uncommitted changes)"
	}
	fmt.Fprintln(w, "commit:", c)
	fmt.Fprintln(w, "date:  ", cmp.Or(b.Date, "unknown"))
	fmt.Fprintln(w, "go:    ", b.Go)
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Long: `version prints the version of this binary, the commit it was built from and
that commit's date, and the Go toolchain and platform.

A release binary (make release) has all three stamped in. A binary built with
plain go build or go install shows what the Go toolchain recorded: the
version go install module@version names; for a build in a git checkout
(go build, make build) a pseudo-version made of the commit's time and hash,
v0.0.0-20261202154527-531d6ae99f03, ending in +dirty when the tree had
uncommitted changes, with the revision and its time; and "(devel)" only when
the build recorded no version control information (a copy of the source
without .git, or GOFLAGS=-buildvcs=false).

It reads no flags, environment variables or files.`,
		Example: `  mcp-reconnect version`,
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			currentBuild().write(cmd.OutOrStdout())
		},
	}
}
