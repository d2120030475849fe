package smtpd

import (
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/limits"
)

// TestAuthFailureDelay: a listener's first failure waits nothing, each
// failure in a burst waits one step more than the one before it, the wait
// never passes its bound however many failures come, and a listener left
// alone forgets them.
func TestAuthFailureDelay(t *testing.T) {
	var f authFailures
	now := time.Unix(1_000_000, 0)
	if d := f.fail(now); d != 0 {
		t.Fatalf("first failure waits %v", d)
	}
	prev := time.Duration(0)
	for i := 1; i < 1000; i++ {
		d := f.fail(now)
		if d > limits.AuthFailureMaxDelay || (d < prev) || (i < 10 && d != time.Duration(i)*AuthFailureStep) {
			t.Fatalf("failure %d waits %v (the one before %v)", i+1, d, prev)
		}
		prev = d
	}
	if prev != limits.AuthFailureMaxDelay {
		t.Fatalf("a long burst waits %v, want the bound %v", prev, limits.AuthFailureMaxDelay)
	}
	if d := f.fail(now.Add(20 * AuthFailureHalfLife)); d > AuthFailureStep {
		t.Fatalf("after %v alone the listener still waits %v", 20*AuthFailureHalfLife, d)
	}
}

// TestAuthFailureDelayConfig: Config.AuthFailureDelay lowers the bound
// (mail-writer --auth-failure-delay), never raises it; negative waits
// nothing; zero is the default.
func TestAuthFailureDelayConfig(t *testing.T) {
	for _, c := range []struct{ set, want time.Duration }{
		{0, limits.AuthFailureMaxDelay},
		{-1, 0},
		{100 * time.Millisecond, 100 * time.Millisecond},
		{time.Hour, limits.AuthFailureMaxDelay},
	} {
		cfg := Config{AuthFailureDelay: c.set}
		if got := cfg.authFailureDelay(); got != c.want {
			t.Errorf("AuthFailureDelay %v: waits at most %v, want %v", c.set, got, c.want)
		}
	}
}
