package daemon

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// Two TUIs started at once start one daemon for the OpenCode 2 service;
// a later one finds it running.
func TestEnsureServiceWatchStartsOne(t *testing.T) {
	reg := &registry.Registry{Dir: t.TempDir() + "/daemons"}
	const file = "/home/me/.local/state/opencode/service.json"
	var starts atomic.Int32
	var removes []func()
	var mu sync.Mutex
	start := func() error {
		starts.Add(1)
		remove, err := reg.Register(registry.Entry{PID: os.Getpid(), URLs: []string{"http://127.0.0.1:49374"}, Service: file, StatusAddr: "127.0.0.1:1", Started: time.Now()})
		mu.Lock()
		removes = append(removes, remove)
		mu.Unlock()
		return err
	}
	defer func() {
		for _, r := range removes {
			r()
		}
	}()
	var wg sync.WaitGroup
	results := make([]bool, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started, err := EnsureServiceWatch(context.Background(), reg, file, start, 5*time.Second)
			if err != nil {
				t.Error(err)
			}
			results[i] = started
		}()
	}
	wg.Wait()
	if n := starts.Load(); n != 1 {
		t.Fatalf("%d daemons started for one service, want 1", n)
	}
	if ok, _ := ServiceWatched(reg, file); !ok {
		t.Fatal("the service is not watched")
	}
	if ok, _ := ServiceWatched(reg, "/other/service.json"); ok {
		t.Fatal("another service file counts as watched")
	}
}

// A daemon that never registers is reported, not waited for forever.
func TestEnsureServiceWatchReportsSilentStart(t *testing.T) {
	reg := &registry.Registry{Dir: t.TempDir() + "/daemons"}
	started, err := EnsureServiceWatch(context.Background(), reg, "/s.json", func() error { return nil }, 200*time.Millisecond)
	if !started || err == nil {
		t.Fatalf("started %v, err %v: want a start and an error", started, err)
	}
}
