package backoff

import (
	"testing"
	"time"
)

func TestDefaultScheduleLands1_2_4_8_16(t *testing.T) {
	p := Default
	p.Jitter = 0
	at := time.Second // the first attempt runs initial-delay after arming
	var got []time.Duration
	for n := 1; n <= p.FastAttempts; n++ {
		got = append(got, at)
		d, ok := p.After(n)
		if !ok {
			t.Fatalf("after attempt %d: no further attempt", n)
		}
		at += d
	}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("attempt times = %v, want %v", got, want)
		}
	}
	// After the fifth attempt the slow tier takes over.
	if d, ok := p.After(5); !ok || d != 5*time.Minute {
		t.Fatalf("After(5) = %v, %v; want 5m, true", d, ok)
	}
}

func TestBaseIsCappedAtMax(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 5 * time.Second}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 60: 5 * time.Second, 1000: 5 * time.Second} {
		if got := p.Base(n); got != want {
			t.Errorf("Base(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestSlowIntervalZeroGivesUp(t *testing.T) {
	p := Default
	p.SlowInterval = 0
	if _, ok := p.After(4); !ok {
		t.Fatal("fast attempt 4 should have a successor")
	}
	if _, ok := p.After(5); ok {
		t.Fatal("with slow-interval 0 the fifth attempt must be the last")
	}
}

func TestZeroFastAttemptsNeverSlow(t *testing.T) {
	p := Default
	p.FastAttempts = 0
	if p.Slow(1000) {
		t.Fatal("fast-attempts 0 must never enter the slow tier")
	}
}

func TestJitterBounds(t *testing.T) {
	p := Default // jitter 0.2
	d := 10 * time.Second
	if got := p.Apply(d, 0); got != 8*time.Second {
		t.Errorf("Apply(r=0) = %v, want 8s", got)
	}
	if got := p.Apply(d, 0.5); got != 10*time.Second {
		t.Errorf("Apply(r=0.5) = %v, want 10s", got)
	}
	for range 10000 {
		got := p.Jittered(d)
		if got < 8*time.Second || got > 12*time.Second {
			t.Fatalf("Jittered(10s) = %v, outside [8s, 12s]", got)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := Default.Validate(); err != nil {
		t.Fatalf("Default invalid: %v", err)
	}
	bad := []Policy{
		{Initial: 0, Max: time.Second},
		{Initial: 2 * time.Second, Max: time.Second},
		{Initial: time.Second, Max: time.Second, Jitter: 1},
		{Initial: time.Second, Max: time.Second, Jitter: -0.1},
		{Initial: time.Second, Max: time.Second, FastAttempts: -1},
		{Initial: time.Second, Max: time.Second, SlowInterval: -1},
	}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want error", p)
		}
	}
}
