package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// A release binary prints the stamped version, commit and date.
func TestVersionPrintsTheStamp(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"
	code, out, _ := runCLI(t, "version")
	want := "mcp-reconnect v1.2.3\ncommit: 0123456789abcdef0123456789abcdef01234567\ndate:   2026-01-02T03:04:05Z\ngo:     " +
		runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if code != 0 || out != want {
		t.Fatalf("version: %d\n%s\nwant\n%s", code, out, want)
	}
	if versionString() != "v1.2.3" {
		t.Fatalf("versionString = %q", versionString())
	}
}

// A plain build says what the toolchain recorded, and nothing it did not:
// the module version, else "(devel)"; the VCS revision, time and dirtiness
// when the build had them, else "unknown".
func TestVersionWithoutStampIsTrue(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "", "", ""
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build info in the test binary")
	}
	b := currentBuild()
	wantVersion := bi.Main.Version
	if wantVersion == "" {
		wantVersion = "(devel)"
	}
	if b.Version != wantVersion || versionString() != wantVersion {
		t.Errorf("version %q, versionString %q, want the module's %q", b.Version, versionString(), wantVersion)
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	if b.Commit != set["vcs.revision"] || b.Date != set["vcs.time"] || b.Modified != (set["vcs.modified"] == "true") {
		t.Errorf("build %+v, vcs settings %v", b, set)
	}
	var out bytes.Buffer
	b.write(&out)
	if b.Commit == "" && !strings.Contains(out.String(), "commit: unknown") {
		t.Errorf("no revision recorded, but version printed\n%s", out.String())
	}

	// What the toolchain records in a git checkout (go build -buildvcs) and
	// for go install module@version.
	for _, c := range []struct {
		b    buildInfo
		want string
	}{
		{buildInfo{Version: "v0.0.0-20261130103904-ee3860d550d2+dirty", Commit: "ee3860d550d285df26cd755d87afc213a65ae56b",
			Date: "2026-11-30T10:39:04Z", Modified: true, Go: "go1.26.8 linux/amd64"},
			"mcp-reconnect v0.0.0-20261130103904-ee3860d550d2+dirty\ncommit: ee3860d550d285df26cd755d87afc213a65ae56b (with uncommitted changes)\ndate:   2026-11-30T10:39:04Z\ngo:     go1.26.8 linux/amd64\n"},
		{buildInfo{Version: "v1.0.0", Go: "go1.26.8 darwin/arm64"},
			"mcp-reconnect v1.0.0\ncommit: unknown (built without version control information)\ndate:   unknown\ngo:     go1.26.8 darwin/arm64\n"},
	} {
		var out bytes.Buffer
		c.b.write(&out)
		if out.String() != c.want {
			t.Errorf("%+v printed\n%s\nwant\n%s", c.b, out.String(), c.want)
		}
	}
}

// version --help says what a build from a git checkout prints (a
// pseudo-version, +dirty for uncommitted changes), and "(devel)" only for
// a build without version control information: what
// TestVersionWithoutStampIsTrue shows it prints.
func TestVersionHelpSaysWhatACheckoutPrints(t *testing.T) {
	_, out, _ := runCLI(t, "version", "--help")
	text := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"for a build in a git checkout (go build, make build) a pseudo-version", "v0.0.0-20261202154527-531d6ae99f03", "+dirty", `"(devel)" only when the build recorded no version control information`} {
		if !strings.Contains(text, want) {
			t.Errorf("version --help does not say %q:\n%s", want, out)
		}
	}
}
