package opencode

import (
	"os"
	"path/filepath"
	"testing"
)

// A config file that names what runs in a directory, for a decision that
// ends processes, must be the user's and writable by nobody else: a file
// of this user that the group or everyone may write is anybody's.
// ReadMCPConfig, which learns what OpenCode runs, reads each of them as
// OpenCode does.
func TestOwnedMCPConfigRefusesAFileOthersCanWrite(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("OPENCODE_TEST_MANAGED_CONFIG_DIR", t.TempDir())
	t.Setenv("OPENCODE_CONFIG_CONTENT", "")
	t.Setenv("OPENCODE_CONFIG_DIR", "")
	t.Setenv("OPENCODE_CONFIG", "")
	for _, c := range []struct {
		mode os.FileMode
		read bool
	}{
		{0o600, true},
		{0o644, true},
		{0o664, false}, // the group may write it
		{0o646, false}, // everyone may write it
		{0o666, false},
	} {
		dir := t.TempDir()
		f := filepath.Join(dir, "opencode.json")
		if err := os.WriteFile(f, []byte(`{"mcp":{"fs":{"type":"local","command":["node","fs.js"]}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, c.mode); err != nil { // past the umask
			t.Fatal(err)
		}
		got := OwnedMCPConfig(dir, os.Getuid())
		if read := len(got["fs"].Command) > 0; read != c.read {
			t.Errorf("a config file of this user with mode %v: read = %v, want %v", c.mode, read, c.read)
		}
		if all, _ := ReadMCPConfig(dir, OwnConfigEnv(GenUnknown)); len(all["fs"].Command) == 0 {
			t.Errorf("a config file of this user with mode %v: ReadMCPConfig did not read it, and OpenCode does", c.mode)
		}
	}
}
