// Package complexity tests that a parser's time grows linearly with its
// input. Fuzzing finds crashes, not slowness: a parser that is quadratic
// in some shape of input (a header folded a hundred thousand times, a URL
// scheme repeated with no URL after it) passes every fuzz run and still
// lets one sender stall a process every trial shares. Linear finds those.
package complexity

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	// Factor is the most a run may slow down when its input doubles. A
	// linear parser takes about 2×, a quadratic one 4×; 3× leaves room
	// for caches and noise between them.
	Factor = 3.0
	// pairs is how many times the two sizes of a doubling are run, one
	// after the other, after a warm-up of each. Runs are timed in the
	// process's CPU time (all its threads, so work that a parser hands to
	// a server goroutine counts), which other processes on the machine do
	// not inflate directly; running the sizes in turn puts both under the
	// same load, and the median of the pairs' ratios ignores the pairs
	// that a burst of it (or a lucky run) made odd.
	pairs = 5
	// retries measure a doubling that looked superlinear again, with
	// twice the pairs, before it fails the test; a real quadratic stays
	// at 4× however often it is measured.
	retries = 2
	// sizeBudget stops the pairs of a doubling early once this much time
	// went into them, so that a quadratic parser fails in seconds.
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
//
// Under the race detector Linear skips: the detector's shadow memory and
// bookkeeping grow with the memory a run touches, so its runs slow down
// faster than the input grows (×2.7 for each doubling of a linear decoder
// on a 2-core host) and it would measure itself, not the parser. `make
// unit` runs every Test…Linear again without it.
func Linear(t testing.TB, name string, setup func(n int) (run func()), base int) {
	t.Helper()
	if raceDetector {
		t.Skip("timed only without the race detector (make unit runs the Linear tests without -race)")
	}
	if base <= 0 {
		t.Fatalf("%s: base size %d", name, base)
	}
	defer quietGC()()
	m := measure{setup: setup, base: base, times: make([]time.Duration, sizes), runs: make([]func(), sizes)}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapBase = ms.HeapAlloc
	for i := 1; i < sizes; i++ {
		r := m.doubling(i, pairs)
		for try := 0; r > Factor && m.times[i] < sizeBudget && try < retries; try++ {
			r = m.doubling(i, 2*pairs<<try)
		}
		if r > Factor {
			t.Fatalf("%s: n=%d took %v, n=%d took %v: ×%.1f for twice the input (most allowed ×%.0f); %s",
				name, base<<(i-1), m.times[i-1], base<<i, m.times[i], r, Factor, m.report())
		}
	}
	t.Logf("%s: %s", name, m.report())
}

// quietGC keeps the collector from running during the timed runs unless
// the heap grows by gcHeadroom, and returns what restores it. A collection
// in the middle of a run costs in proportion to everything live, the
// inputs of all four sizes included, and comes at times that vary from
// one run to the next: noise, not the parser's cost. The headroom still
// lets a quadratic parser that allocates as it goes finish (and fail).
func quietGC() (restore func()) {
	prefault()
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

// prefaultBytes is how much memory prefault touches.
const prefaultBytes = 256 << 20

// prefault touches prefaultBytes of heap and lets it go: the runtime keeps
// the freed memory, so the runs that follow allocate pages that exist
// already. A page a process touches first can cost far more than the
// parser's work on it (on a virtual machine whose memory the host backs
// only on first use, milliseconds for a few megabytes), and which runs
// would pay it is chance: a linear parser then looked superlinear.
func prefault() {
	b := make([]byte, prefaultBytes)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
}

type measure struct {
	setup func(int) func()
	base  int
	runs  []func()        // made when a size is first run, so a failure stops early
	times []time.Duration // the median time of each size in its last doubling
	// heapBase is the live heap when measuring began.
	heapBase uint64
}

// doubling runs sizes i-1 and i in turn and returns the median of the
// pairs' ratios (with times under Floor counted as Floor).
func (m *measure) doubling(i, pairs int) float64 {
	m.run(i - 1) // warm-ups
	if d := m.run(i); d > sizeBudget {
		// Too slow to repeat: one more run of each says enough.
		small, large := m.run(i-1), m.run(i)
		m.times[i-1], m.times[i] = small, large
		return ratio(small, large)
	}
	var rs []float64
	var small, large []time.Duration
	spent := time.Duration(0)
	for p := 0; p < pairs && (p < 3 || spent < sizeBudget); p++ {
		a, b := m.run(i-1), m.run(i)
		rs, small, large = append(rs, ratio(a, b)), append(small, a), append(large, b)
		spent += a + b
	}
	m.times[i-1], m.times[i] = median(small), median(large)
	return median(rs)
}

// run runs size i once and returns the CPU time it took.
func (m *measure) run(i int) time.Duration {
	if m.runs[i] == nil {
		m.runs[i] = m.setup(m.base << i)
	}
	// Garbage of earlier runs is not this run's cost: it is collected
	// before a run, once it takes half the headroom. Not before every
	// run: a collection also shrinks the goroutine's stack, and a deep
	// parse then paid for growing it again on fresh memory, by chance.
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > m.heapBase+gcHeadroom/2 {
		runtime.GC()
	}
	start := cpuTime()
	m.runs[i]()
	return cpuTime() - start
}

func ratio(small, large time.Duration) float64 {
	return float64(max(large, Floor)) / float64(max(small, Floor))
}

func median[T cmp.Ordered](xs []T) T {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func (m *measure) report() string {
	var b strings.Builder
	for i, d := range m.times {
		if d == 0 {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "n=%d %v", m.base<<i, d.Round(time.Microsecond))
	}
	return b.String()
}
