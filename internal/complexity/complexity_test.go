package complexity

import (
	"fmt"
	"runtime"
	"testing"
)

// recorder stands in for a test so that a failing Linear can be watched.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func linear(tb testing.TB, setup func(int) func(), base int) string {
	if raceDetector {
		tb.Skip("Linear skips under the race detector")
	}
	r := &recorder{TB: tb}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Linear(r, "f", setup, base)
	}()
	<-done
	return r.failed
}

var sink int

func sum(n int) func() {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = i
	}
	return func() {
		s := 0
		for _, x := range xs {
			s += x
		}
		sink = s
	}
}

func square(n int) func() {
	return func() {
		s := 0
		for i := range n {
			for j := range n {
				s += i ^ j
			}
		}
		sink = s
	}
}

func TestLinearPassesLinear(t *testing.T) {
	if msg := linear(t, sum, 1<<20); msg != "" {
		t.Fatalf("a linear sum failed: %s", msg)
	}
}

func TestLinearFailsQuadratic(t *testing.T) {
	if msg := linear(t, square, 1000); msg == "" {
		t.Fatal("a quadratic double loop passed")
	}
}

// Times under the floor are noise, not growth: a parser that handles
// every size in microseconds passes, whatever their ratios.
func TestLinearFloor(t *testing.T) {
	if msg := linear(t, square, 10); msg != "" {
		t.Fatalf("a quadratic loop over 80 items failed: %s", msg)
	}
}
