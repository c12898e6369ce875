package release

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
)

// setting is one of the Makefile's release settings, which make passes to
// scripts/release.sh and to this test; without it in the environment, the
// Makefile's default ("NAME ?= value", $(OTHER) expanded).
func setting(name string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		panic(err)
	}
	for _, m := range makeDefault.FindAllStringSubmatch(string(b), -1) {
		if m[1] == name {
			return makeRef.ReplaceAllStringFunc(strings.TrimSpace(m[2]), func(ref string) string { return setting(ref[2 : len(ref)-1]) })
		}
	}
	panic("the Makefile sets no " + name)
}

var (
	makeDefault = regexp.MustCompile(`(?m)^([A-Z_]+) \?= (.*)$`)
	makeRef     = regexp.MustCompile(`\$\([A-Z_]+\)`)
)

// formulaPlatforms are the formula's blocks, by Homebrew's names, and the
// release archive each must install from.
var formulaPlatforms = []struct{ os, cpu, asset string }{
	{"macos", "arm", "mcp-reconnect-darwin-arm64.tar.gz"},
	{"macos", "intel", "mcp-reconnect-darwin-amd64.tar.gz"},
	{"linux", "arm", "mcp-reconnect-linux-arm64.tar.gz"},
	{"linux", "intel", "mcp-reconnect-linux-amd64.tar.gz"},
}

var (
	urlLine    = regexp.MustCompile(`^\s*url "([^"]+)"$`)
	sha256Line = regexp.MustCompile(`^\s*sha256 "([0-9a-f]{64})"$`)
	blockLine  = regexp.MustCompile(`^\s*(on_macos|on_linux|on_arm|on_intel|service|test) do$`)
)

// The formula make release writes: the licence; for each OS and CPU, the
// URL of that platform's release archive under RELEASE_URL/VERSION and its
// sha256 from SHA256SUMS; an install of the archive's files, with no chmod;
// a service block running `mcp-reconnect watch` with its log under
// Homebrew's var/log and the duplicate's exit status 0 (launchd restarts
// after any other status); a test block running `version`; the tap it lives in.
// Read as text here, and by Ruby below.
func TestFormulaText(t *testing.T) {
	dir := distDir(t)
	st := hostStamp(t, dir)
	sums := readSums(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, "mcp-reconnect.rb"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	found := map[string]bool{}
	var stack []string
	var lastURL string
	for i, line := range strings.Split(text, "\n") {
		if m := blockLine.FindStringSubmatch(line); m != nil {
			stack = append(stack, m[1])
			continue
		}
		if strings.TrimSpace(line) == "end" && len(stack) > 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		if m := urlLine.FindStringSubmatch(line); m != nil {
			lastURL = m[1]
			continue
		}
		m := sha256Line.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if lastURL == "" {
			t.Fatalf("line %d: sha256 without a url", i+1)
		}
		asset := path.Base(lastURL)
		if want := setting("RELEASE_URL") + "/" + st.version + "/" + asset; lastURL != want {
			t.Errorf("url %s, want %s", lastURL, want)
		}
		if sums[asset] == "" || m[1] != sums[asset] {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %q", asset, m[1], sums[asset])
		}
		where := strings.Join(stack, "/")
		for _, p := range formulaPlatforms {
			if p.asset == asset && where != "on_"+p.os+"/on_"+p.cpu {
				t.Errorf("%s is offered in %s, want on_%s/on_%s", asset, where, p.os, p.cpu)
			}
		}
		found[asset] = true
		lastURL = ""
	}
	for _, p := range formulaPlatforms {
		if !found[p.asset] {
			t.Errorf("the formula offers no %s", p.asset)
		}
	}
	for _, want := range []string{
		"class McpReconnect < Formula\n",
		`  version "` + strings.TrimPrefix(st.version, "v") + `"` + "\n",
		`  license "` + setting("LICENSE_SPDX") + `"` + "\n",
		"#   brew install " + setting("BREW_TAP") + "/mcp-reconnect\n",
		`    bin.install "mcp-reconnect"` + "\n",
		`    run [opt_bin/"mcp-reconnect", "watch"]` + "\n",
		`    environment_variables ` + service.DuplicateExitEnv + `: "0"` + "\n",
		`    log_path var/"log/mcp-reconnect.log"` + "\n",
		`shell_output("#{bin}/mcp-reconnect version")`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the formula lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "chmod") {
		t.Errorf("the formula changes modes: the archive's binary is 0755 already:\n%s", text)
	}
}

// ruby is Ruby, required under CI (.ci/run installs it), else optional.
func ruby(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ruby")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("ruby missing under CI=true (apt-get install ruby): %v", err)
		}
		t.Skipf("ruby missing: %v", err)
	}
	return p
}

// Ruby parses the formula (ruby -c) and, through a stand-in for
// Homebrew's DSL (testdata/formula_dsl.rb), loads it for each platform,
// in that platform's release archive unpacked as Homebrew unpacks it (in
// its one top directory): one URL and sha256, each file install names
// present in the archive (the binary, three completions, every manual
// page), the service block's command, log and environment, and, for this machine's
// platform, the test block run against the archive's binary as it is.
func TestFormulaRuby(t *testing.T) {
	dir := distDir(t)
	rb := ruby(t)
	st := hostStamp(t, dir)
	sums := readSums(t, dir)
	formula := filepath.Join(dir, formulaFile)
	dsl, err := filepath.Abs(filepath.Join("testdata", "formula_dsl.rb"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(rb, "-c", formula).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "Syntax OK" {
		t.Fatalf("ruby -c: %v\n%s", err, out)
	}
	hostAsset := assetName(runtime.GOOS, runtime.GOARCH) + ".tar.gz"
	for _, p := range formulaPlatforms {
		t.Run(p.os+"-"+p.cpu, func(t *testing.T) {
			stage := extractArchive(t, filepath.Join(dir, p.asset))
			cmd := exec.Command(rb, dsl, formula, p.os, p.cpu, fmt.Sprint(p.asset == hostAsset))
			cmd.Dir = stage
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("loading the formula in %s: %v\n%s", stage, err, out)
			}
			var got struct {
				Class, Version, License string
				URLs                    []string
				SHA256s                 []string
				Install                 [][]any
				Service                 struct {
					Run          []string
					KeepAlive    map[string]any    `json:"keep_alive"`
					Env          map[string]string `json:"environment_variables"`
					LogPath      string            `json:"log_path"`
					ErrorLogPath string            `json:"error_log_path"`
				}
				Test [][]any
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if got.Class != "McpReconnect" || got.Version != strings.TrimPrefix(st.version, "v") || got.License != setting("LICENSE_SPDX") {
				t.Errorf("class %s version %s license %s", got.Class, got.Version, got.License)
			}
			if len(got.URLs) != 1 || path.Base(got.URLs[0]) != p.asset || len(got.SHA256s) != 1 || got.SHA256s[0] != sums[p.asset] {
				t.Errorf("urls %v sha256s %v, want %s with %s", got.URLs, got.SHA256s, p.asset, sums[p.asset])
			}
			installed := map[string]string{}
			for _, in := range got.Install {
				if len(in) == 3 && in[0] == "install" {
					for src, dst := range in[2].(map[string]any) {
						installed[src] = fmt.Sprint(in[1], "/", dst)
					}
				}
			}
			pages, _ := filepath.Glob(filepath.Join(stage, "man", "man1", "*.1"))
			want := map[string]string{
				"mcp-reconnect":                  "/prefix/bin/mcp-reconnect",
				"completions/mcp-reconnect.bash": "/prefix/etc/bash_completion.d/mcp-reconnect",
				"completions/_mcp-reconnect":     "/prefix/share/zsh/site-functions/_mcp-reconnect",
				"completions/mcp-reconnect.fish": "/prefix/share/fish/vendor_completions.d/mcp-reconnect.fish",
			}
			for _, pg := range pages {
				want["man/man1/"+filepath.Base(pg)] = "/prefix/share/man/man1/" + filepath.Base(pg)
			}
			if len(pages) < 5 || fmt.Sprint(installed) != fmt.Sprint(want) {
				t.Errorf("install does %v\nwant %v", installed, want)
			}
			if strings.Join(got.Service.Run, " ") != "/opt/homebrew/opt/mcp-reconnect/bin/mcp-reconnect watch" ||
				got.Service.LogPath != "/opt/homebrew/var/log/mcp-reconnect.log" || got.Service.ErrorLogPath != got.Service.LogPath || got.Service.KeepAlive["successful_exit"] != false {
				t.Errorf("service %+v", got.Service)
			}
			// service.DuplicateExitEnv = 0: launchd restarts a job that
			// exits non-zero, and a watch
			// refused as a duplicate would be refused again for ever.
			if len(got.Service.Env) != 1 || got.Service.Env[service.DuplicateExitEnv] != "0" {
				t.Errorf("the service's environment %v, want %s=0 alone", got.Service.Env, service.DuplicateExitEnv)
			}
			if p.asset == hostAsset && len(got.Test) != 1 {
				t.Errorf("the test block against this machine's binary did %v", got.Test)
			}
		})
	}
}
