package procview

import (
	"strings"
	"testing"
)

func TestFindEnv(t *testing.T) {
	long := strings.Repeat("x", 10000)
	for _, c := range []struct {
		environ string
		want    string
		ok      bool
	}{
		{"A=1\x00OPENCODE_PID=42\x00B=2\x00", "42", true},
		{"OPENCODE_PID=42", "42", true}, // no final NUL
		{"OPENCODE_PIDX=1\x00XOPENCODE_PID=2\x00", "", false},
		{"BIG=" + long + "\x00OPENCODE_PID=7\x00", "7", true},
		{"OPENCODE_PID=" + long + "\x00", long, true},
		{"OPENCODE_PID=1\x00OPENCODE_PID=2\x00", "2", true},
		{"", "", false},
		{"\x00\x00\x00", "", false},
	} {
		got, ok, err := findEnv(strings.NewReader(c.environ), "OPENCODE_PID")
		if err != nil || ok != c.ok || got != c.want {
			t.Errorf("findEnv(%.40q) = %.20q, %v, %v; want %.20q, %v", c.environ, got, ok, err, c.want, c.ok)
		}
	}
}

func FuzzFindEnv(f *testing.F) {
	f.Add([]byte("A=1\x00OPENCODE_PID=42\x00"), "OPENCODE_PID")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		v, ok, err := findEnv(strings.NewReader(string(b)), name)
		if err == nil && ok && !strings.Contains(string(b), name+"="+v) {
			t.Fatalf("found %q=%q not in the input", name, v)
		}
	})
}
