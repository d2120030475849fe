package complexity

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder stands in for a test so that a failing Linear can be watched.
type recorder struct {
	testing.TB
	failed, logged string
}

func (r *recorder) Logf(format string, args ...any) {
	r.logged += fmt.Sprintf(format, args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// linear runs Linear and returns its failure ("" if it passed) and what
// it logged.
func linear(tb testing.TB, setup func(int) func(), base int) (failed, logged string) {
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
	return r.failed, r.logged
}

var sink int

// sum adds up n numbers it makes as it goes, so that a large n costs CPU
// time and no memory.
func sum(n int) func() {
	return func() {
		s := 0
		for i := range n {
			s += i ^ (i >> 3)
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
	if msg, _ := linear(t, sum, 1<<25); msg != "" {
		t.Fatalf("a linear sum failed: %s", msg)
	}
}

// Its base, about 8 ms here, is four times MinBase: a host up to four
// times faster measures it as it is, and its 8n (64 times the base) still
// runs in well under a second.
func TestLinearFailsQuadratic(t *testing.T) {
	msg, _ := linear(t, square, 4000)
	t.Log(msg)
	if msg == "" {
		t.Fatal("a quadratic double loop passed")
	}
	if !strings.Contains(msg, "times the input") {
		t.Fatalf("a quadratic double loop failed for another reason: %s", msg)
	}
}

// A base that runs in microseconds measures noise: even a quadratic loop
// then passes every doubling under Floor. Linear refuses such a base.
func TestLinearRefusesSmallBase(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(int) func()
		base  int
	}{{"linear", sum, 100}, {"quadratic", square, 10}} {
		msg, _ := linear(t, c.setup, c.base)
		if !strings.Contains(msg, "measures noise") {
			t.Fatalf("%s with base %d: got %q, want a refusal of the base", c.name, c.base, msg)
		}
	}
}

// A base under MinBase is doubled until it takes MinBase, and then
// measured. The base is chosen on this machine, not fixed: a sum whose
// run takes 0.3 to 0.6 of MinBase (once doubled still short of it, four
// times past it), so that the test does not depend on how fast the host
// is.
func TestLinearRaisesSmallBase(t *testing.T) {
	if raceDetector {
		t.Skip("Linear skips under the race detector")
	}
	n := 1 << 26
	for n > 1<<10 && timeOf(sum(n)) >= MinBase*6/10 {
		n /= 2
	}
	msg, logged := linear(t, sum, n)
	if msg != "" {
		t.Fatalf("a linear sum from base %d failed: %s", n, msg)
	}
	if raised := fmt.Sprintf("f: n=%d ", 2*n); !strings.HasPrefix(logged, raised) && !strings.HasPrefix(logged, fmt.Sprintf("f: n=%d ", 4*n)) {
		t.Fatalf("base %d was not raised: %s", n, logged)
	}
}

// timeOf is the least CPU time of three runs of run.
func timeOf(run func()) time.Duration {
	best := time.Duration(1 << 62)
	for range 3 {
		start := cpuTime()
		run()
		best = min(best, cpuTime()-start)
	}
	return best
}

var sinkBytes []byte

// allocate allocates n bytes, 64 KiB at a time, and keeps none of them.
func allocate(n int) func() {
	return func() {
		for range n >> 16 {
			sinkBytes = make([]byte, 1<<16)
		}
	}
}

// A test whose runs would allocate more than MaxRunAlloc is refused
// before they run.
func TestLinearRefusesAllocatingRun(t *testing.T) {
	msg, _ := linear(t, allocate, MaxRunAlloc/2)
	if !strings.Contains(msg, "cut the repeats or the base") {
		t.Fatalf("runs that allocate %d MiB at the base: got %q, want a refusal of the allocation", MaxRunAlloc>>21, msg)
	}
}

// Runs that allocate more than half of minTouched get that much more
// memory touched before they run, and a linear one passes.
func TestLinearTouchesWhatRunsAllocate(t *testing.T) {
	work := func(n int) func() {
		add, alloc := sum(n/2), allocate(n)
		return func() { add(); alloc() }
	}
	if msg, _ := linear(t, work, minTouched/8); msg != "" {
		t.Fatalf("runs that allocate up to %d MiB failed: %s", minTouched>>20, msg)
	}
}

// Allocations that grow faster than the input fail, even where the time
// they take does not show it: each run also adds up a fixed 1<<26 numbers
// (about 25 ms here), which keeps the base from being raised on any host
// up to 5 times faster and its time about flat, so that only the
// allocations (64 MiB at the base, 256 MiB at 2n, which depend on n
// alone) decide.
func TestLinearFailsQuadraticAllocation(t *testing.T) {
	work := func(n int) func() {
		add, alloc := sum(1<<26), allocate(n*n)
		return func() { add(); alloc() }
	}
	msg, _ := linear(t, work, 8<<10)
	if !strings.Contains(msg, "most allowed ×3)") {
		t.Fatalf("a quadratic allocation: got %q, want it failed for its allocations", msg)
	}
}
