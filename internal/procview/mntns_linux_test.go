package procview

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestSameMountNamespaceOfItself(t *testing.T) {
	same, err := SameMountNamespace(os.Getpid())
	if err != nil || !same {
		t.Fatalf("this process: %v, %v", same, err)
	}
}

// The comparison, on a recorded tree: one inode per namespace.
func TestSameMountNamespaceComparesTheLinks(t *testing.T) {
	root := t.TempDir()
	for pid, target := range map[string]string{"self": "mnt:[4026531841]", "7": "mnt:[4026532999]", "8": "mnt:[4026531841]"} {
		if err := os.MkdirAll(filepath.Join(root, pid, "ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, pid, "ns", "mnt")); err != nil {
			t.Fatal(err)
		}
	}
	if same, err := sameMountNamespace(root, 7); err != nil || same {
		t.Errorf("another namespace: %v, %v", same, err)
	}
	if same, err := sameMountNamespace(root, 8); err != nil || !same {
		t.Errorf("the same namespace: %v, %v", same, err)
	}
	if _, err := sameMountNamespace(root, 9); !errors.Is(err, ErrGone) {
		t.Errorf("a process gone: %v, want ErrGone", err)
	}
}

// A process in a mount namespace of its own (what a container is) does
// not see this machine's files.
func TestSameMountNamespaceOfAnotherNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("no unshare:", err)
		}
		t.Fatal("no unshare under CI:", err)
	}
	args := []string{"-m", "sleep", "60"}
	if os.Geteuid() != 0 {
		args = append([]string{"-r"}, args...) // a user namespace lends the right to make one
	}
	cmd := exec.Command(unshare, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	// unshare enters the namespace, then becomes sleep.
	deadline := time.Now().Add(5 * time.Second)
	for {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if string(comm) == "sleep\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unshare %v did not become sleep (comm %q)", args, comm)
		}
		time.Sleep(10 * time.Millisecond)
	}
	same, err := SameMountNamespace(pid)
	if err != nil || same {
		t.Fatalf("a process in its own mount namespace: same = %v, %v", same, err)
	}
}
