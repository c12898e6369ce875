package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sums() map[string]string {
	m := map[string]string{}
	for i, n := range []string{"darwin-arm64", "darwin-amd64", "linux-arm64", "linux-amd64"} {
		m["mcp-reconnect-"+n+".tar.gz"] = strings.Repeat(string(rune('a'+i)), 64)
		m["mcp-reconnect-"+n] = strings.Repeat("f", 64) // the bare binary, not offered
	}
	return m
}

func opts() Options {
	return Options{Version: "v1.2.3", Commit: "0123456789abcdef", ReleaseURL: "https://example.com/dl/", Homepage: "https://example.com/p", Tap: "mcp-reconnect/tap", Sums: sums()}
}

func TestWrite(t *testing.T) {
	b, err := Write(opts())
	if err != nil {
		t.Fatal(err)
	}
	f := string(b)
	for _, want := range []string{
		`version "1.2.3"`,
		"    on_arm do\n      url \"https://example.com/dl/v1.2.3/mcp-reconnect-darwin-arm64.tar.gz\"\n      sha256 \"" + strings.Repeat("a", 64) + "\"\n",
		"    on_intel do\n      url \"https://example.com/dl/v1.2.3/mcp-reconnect-linux-amd64.tar.gz\"\n      sha256 \"" + strings.Repeat("d", 64) + "\"\n",
		"#   brew install mcp-reconnect/tap/mcp-reconnect\n",
		`    bin.install "mcp-reconnect"` + "\n",
		`    man1.install Dir["man/man1/*.1"]` + "\n",
		`assert_match "mcp-reconnect v#{version}"`,
		`run [opt_bin/"mcp-reconnect", "watch"]`,
		"    environment_variables MCP_RECONNECT_DUPLICATE_EXIT: \"0\"\n",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("formula lacks %q:\n%s", want, f)
		}
	}
	if strings.Contains(f, "license") || strings.Contains(f, "chmod") || strings.Contains(f, strings.Repeat("f", 64)) {
		t.Errorf("a license without one chosen, a chmod, or the bare binary:\n%s", f)
	}
	o := opts()
	o.License, o.Version = "MIT", "1.2.3"
	b, _ = Write(o)
	if !strings.Contains(string(b), `  license "MIT"`+"\n") || !strings.Contains(string(b), `assert_match "mcp-reconnect #{version}"`) {
		t.Errorf("formula:\n%s", b)
	}
}

func TestWriteRefuses(t *testing.T) {
	o := opts()
	delete(o.Sums, "mcp-reconnect-linux-arm64.tar.gz")
	if _, err := Write(o); err == nil || !strings.Contains(err.Error(), "mcp-reconnect-linux-arm64.tar.gz") {
		t.Errorf("a missing archive: %v", err)
	}
	for _, tap := range []string{"", "mcp-reconnect", "a/b/c", `x/"y`} {
		o = opts()
		o.Tap = tap
		if _, err := Write(o); err == nil {
			t.Errorf("tap %q accepted", tap)
		}
	}
	o = opts()
	o.Homepage = `https://example.com/"#{system("id")}"`
	if _, err := Write(o); err == nil {
		t.Error("a homepage that would break out of its Ruby string")
	}
}

func TestReadSums(t *testing.T) {
	p := filepath.Join(t.TempDir(), "SHA256SUMS")
	if err := os.WriteFile(p, []byte(strings.Repeat("a", 64)+"  mcp-reconnect-linux-amd64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := readSums(p); err != nil || m["mcp-reconnect-linux-amd64"] != strings.Repeat("a", 64) {
		t.Fatalf("%v %v", m, err)
	}
	if err := os.WriteFile(p, []byte("nonsense\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSums(p); err == nil {
		t.Fatal("a bad line was read")
	}
}
