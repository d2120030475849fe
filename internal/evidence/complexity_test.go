package evidence

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestVerifyLinear checks that Verify's time grows linearly with the
// trail, on trails of n, 2n, 4n and 8n lines and on one line of growing
// size (a quadratic parser would show a ratio near 64 at 8n): the ratio
// of 8n to n must stay under 24, generous for a loaded machine.
func TestVerifyLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	lines := join(trail(t, 8*500))
	byLines := func(k int) []byte {
		// The first k·500 lines of the same trail.
		idx := 0
		for range k * 500 {
			idx += bytes.IndexByte(lines[idx:], '\n') + 1
		}
		return lines[:idx]
	}
	// One hostile line: deep in a string, far from valid.
	byLine := func(k int) []byte {
		return []byte(`{"seq":1,"time":"` + strings.Repeat(`\u0041`, k*4000) + `"}` + "\n")
	}
	for name, input := range map[string]func(int) []byte{"lines": byLines, "one line": byLine} {
		t.Run(name, func(t *testing.T) {
			sizes := []int{1, 2, 4, 8}
			took := make([]time.Duration, len(sizes))
			for i, k := range sizes {
				in := input(k)
				took[i] = minTime(func() { Verify(bytes.NewReader(in)) })
			}
			ratio := float64(took[3]) / float64(took[0])
			t.Logf("%s: n %v, 2n %v, 4n %v, 8n %v (8n/n %.1f)", name, took[0], took[1], took[2], took[3], ratio)
			if ratio > 24 {
				t.Fatalf("8n took %.1f× as long as n: not linear", ratio)
			}
		})
	}
}

// minTime is the least of five runs of f, which filters out a shared
// machine's noise.
func minTime(f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	return best
}
