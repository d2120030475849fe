// Package complexity tests that a parser's time grows linearly with its
// input. Fuzzing finds crashes, not slowness: a parser that is quadratic
// in some shape of input (a header folded a hundred thousand times, a URL
// scheme repeated with no URL after it) passes every fuzz run and still
// lets one sender stall a process every trial shares. Linear finds those.
package complexity

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

const (
	// Factor is the most a run may slow down when its input doubles. A
	// linear parser takes about 2×, a quadratic one 4×; 3× leaves room
	// for caches and noise between them.
	Factor = 3.0
	// reps is how many timed runs each size gets, after one warm-up; the
	// fastest counts, since noise on a shared machine only adds time. Runs
	// are timed in the process's CPU time (all its threads, so work that
	// a parser hands to a server goroutine counts), which other processes
	// on the machine do not inflate.
	reps = 5
	// retries re-measure a doubling that looked superlinear before it
	// fails the test; a real quadratic stays at 4× however often it is
	// measured, a burst of load from elsewhere does not.
	retries = 3
	// sizeBudget stops the repetitions of one size early once this much
	// time went into it, so that a quadratic parser fails in seconds.
	sizeBudget = 400 * time.Millisecond
	// Floor is the time below which a run counts as Floor: timer and
	// scheduler noise decide ratios between microsecond runs, and a parser
	// that handles 8n in under a millisecond cannot stall anything. (A
	// capped parser, which refuses or cuts off large input, is flat and
	// fast; that passes.) Choose base sizes that make the runs of a linear
	// parser take milliseconds, so that a quadratic one would take seconds.
	Floor = time.Millisecond
	// gcHeadroom is how much the heap may grow during the measurements
	// before the collector runs.
	gcHeadroom = 512 << 20
	// sizes is how many times the base is doubled: n, 2n, 4n, 8n.
	sizes = 4
)

// Linear times setup(n)'s run at n = base, 2·base, 4·base and 8·base and
// fails t if any doubling of n more than triples the time. setup builds
// the input and is not timed; run parses it and may be called many times.
// The times are logged (go test -v) so that they can be compared.
func Linear(t testing.TB, name string, setup func(n int) (run func()), base int) {
	t.Helper()
	if base <= 0 {
		t.Fatalf("%s: base size %d", name, base)
	}
	defer quietGC()()
	m := measure{setup: setup, base: base, times: make([]time.Duration, sizes), runs: make([]func(), sizes)}
	for i := range sizes {
		m.time(i)
		if i == 0 {
			continue
		}
		// Runs too slow to repeat are too long for noise to triple.
		for try := 0; m.ratio(i) > Factor && m.times[i] < sizeBudget && try < retries; try++ {
			m.time(i - 1)
			m.time(i)
		}
		if r := m.ratio(i); r > Factor {
			t.Fatalf("%s: n=%d took %v, n=%d took %v: ×%.1f for twice the input (most allowed ×%.0f); %s",
				name, base<<(i-1), m.times[i-1], base<<i, m.times[i], r, Factor, m.report(base))
		}
	}
	t.Logf("%s: %s", name, m.report(base))
}

// quietGC keeps the collector from running during the timed runs unless
// the heap grows by gcHeadroom, and returns what restores it. A collection
// in the middle of a run costs in proportion to everything live, the
// inputs of all four sizes included, and comes at times that vary from
// one run to the next: noise, not the parser's cost. The headroom still
// lets a quadratic parser that allocates as it goes finish (and fail).
func quietGC() (restore func()) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(int64(ms.HeapAlloc) + gcHeadroom)
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

type measure struct {
	setup func(int) func()
	base  int
	runs  []func()        // made when a size is first timed, so a failure stops early
	times []time.Duration // fastest run so far per size; 0 before the first
}

// time runs size i (one warm-up, then up to reps timed runs) and keeps the
// fastest time seen.
func (m *measure) time(i int) {
	if m.runs[i] == nil {
		m.runs[i] = m.setup(m.base << i)
	}
	run := m.runs[i]
	spent := time.Duration(0)
	for r := 0; r <= reps && (r < 2 || spent < sizeBudget); r++ {
		runtime.GC() // garbage of earlier runs is not this run's cost
		start := cpuTime()
		run()
		d := cpuTime() - start
		spent += d
		if r == 0 && m.times[i] == 0 {
			if d > sizeBudget {
				m.times[i] = d // too slow to repeat: one run says enough
				return
			}
			continue // warm-up
		}
		if m.times[i] == 0 || d < m.times[i] {
			m.times[i] = d
		}
	}
}

// ratio is how much slower size i ran than size i-1, with times under
// Floor counted as Floor.
func (m *measure) ratio(i int) float64 {
	return float64(max(m.times[i], Floor)) / float64(max(m.times[i-1], Floor))
}

func (m *measure) report(base int) string {
	var b strings.Builder
	for i, d := range m.times {
		if d == 0 {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "n=%d %v", base<<i, d.Round(time.Microsecond))
	}
	return b.String()
}
