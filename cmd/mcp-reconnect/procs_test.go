package main

import (
	"runtime"
	"testing"
)

// The daemon runs on one processor, unless the user's $GOMAXPROCS says
// otherwise (then the runtime's own reading of it stands).
func TestOneProcUnlessGOMAXPROCSIsSet(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(was)
	runtime.GOMAXPROCS(2)
	if got := oneProc(func(k string) string { return map[string]string{"GOMAXPROCS": "2"}[k] }); got != 0 || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("with GOMAXPROCS=2 set: oneProc made %d, the runtime runs %d processors", got, runtime.GOMAXPROCS(0))
	}
	for _, v := range []string{"", "0", "abc", "-1"} {
		runtime.GOMAXPROCS(2)
		if got := oneProc(func(string) string { return v }); got != 1 || runtime.GOMAXPROCS(0) != 1 {
			t.Fatalf("with GOMAXPROCS=%q (none the runtime takes): oneProc made %d, the runtime runs %d processors", v, got, runtime.GOMAXPROCS(0))
		}
	}
}
