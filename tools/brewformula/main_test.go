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
		m["mcp-reconnect-"+n] = strings.Repeat(string(rune('a'+i)), 64)
	}
	return m
}

func opts() Options {
	return Options{Version: "v1.2.3", Commit: "0123456789abcdef", ReleaseURL: "https://example.com/dl/", Homepage: "https://example.com/p", Sums: sums()}
}

func TestWrite(t *testing.T) {
	b, err := Write(opts())
	if err != nil {
		t.Fatal(err)
	}
	f := string(b)
	for _, want := range []string{
		`version "1.2.3"`,
		"    on_arm do\n      url \"https://example.com/dl/v1.2.3/mcp-reconnect-darwin-arm64\"\n      sha256 \"" + strings.Repeat("a", 64) + "\"\n",
		"    on_intel do\n      url \"https://example.com/dl/v1.2.3/mcp-reconnect-linux-amd64\"\n      sha256 \"" + strings.Repeat("d", 64) + "\"\n",
		`assert_match "mcp-reconnect v#{version}"`,
		`run [opt_bin/"mcp-reconnect", "watch"]`,
	} {
		if !strings.Contains(f, want) {
			t.Errorf("formula lacks %q:\n%s", want, f)
		}
	}
	if strings.Contains(f, "license") {
		t.Errorf("a license without one chosen:\n%s", f)
	}
	o := opts()
	o.License, o.Version = "Apache-2.0", "1.2.3"
	b, _ = Write(o)
	if !strings.Contains(string(b), `  license "Apache-2.0"`+"\n") || !strings.Contains(string(b), `assert_match "mcp-reconnect #{version}"`) {
		t.Errorf("formula:\n%s", b)
	}
}

func TestWriteRefuses(t *testing.T) {
	o := opts()
	delete(o.Sums, "mcp-reconnect-linux-arm64")
	if _, err := Write(o); err == nil || !strings.Contains(err.Error(), "mcp-reconnect-linux-arm64") {
		t.Errorf("a missing binary: %v", err)
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
