package main

import (
	"bytes"
	"strings"
	"testing"
)

// doctor --reap with no terminal on standard input and no --yes refuses,
// naming --yes, before it lists or ends anything; --yes without --reap
// and --reap with --json are refused too. The environment cannot say yes.
// (No test here ends a process: this machine's orphans are not the
// test's.)
func TestDoctorReapRefusals(t *testing.T) {
	t.Setenv("MCP_RECONNECT_YES", "true")
	t.Setenv("MCP_RECONNECT_STATUS_ADDR", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--config", "", "--reap"}, "pass --yes"},
		{[]string{"doctor", "--config", "", "--yes"}, "--yes is for --reap"},
		{[]string{"doctor", "--config", "", "--reap", "--yes", "--json"}, "--json is not for --reap"},
	} {
		var out, errb bytes.Buffer
		root := newRoot(&out, &errb)
		root.SetIn(strings.NewReader("y\ny\n")) // not a terminal
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: err %v, output %q; want an error saying %q", tc.args, err, out.String(), tc.want)
		}
	}
}
