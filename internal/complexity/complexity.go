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
	// Span is the most the largest size may take against the base, 8
	// times its input: a linear parser takes about ×8, a quadratic one
	// ×64; ×24 lies between them with a factor of about 3 either way, so
	// that no burst of noise decides.
	Span = 24.0
	// pairs is how many times the base and the largest size are run, one
	// after the other, once each has run as a warm-up. Runs are timed in
	// the process's CPU time (all its threads, so work that a parser hands
	// to a server goroutine counts), which other processes on the machine
	// do not inflate directly; running the sizes in turn puts both under
	// the same load, and the median of the pairs' ratios ignores the pairs
	// that a burst of it (or a lucky run) made odd. The ratio of n to 8n
	// is timed directly, not as the product of three doublings' ratios:
	// that multiplied the noise of three medians, and timed 2n and 4n
	// three times or more each for nothing the span does not show.
	pairs = 5
	// sizeBudget stops the pairs early, after three, once this much time
	// went into them: three pairs of a base that takes 15 ms and more
	// decide as well as five, and a quadratic parser fails in seconds. A
	// span that looks superlinear is measured again with twice the pairs,
	// all of them, before it fails.
	sizeBudget = 400 * time.Millisecond
	// Floor is the time below which a run counts as Floor: timer and
	// scheduler noise decide ratios between microsecond runs. (A capped
	// parser, which refuses or cuts off large input, is flat; that
	// passes.) MinBase keeps base sizes well above it.
	Floor = time.Millisecond
	// MinBase is the least CPU time the base size's run may take. A base
	// that runs faster measures timer and scheduler noise, not the
	// parser, and passes a quadratic parser whose sizes all stay under
	// Floor. Linear doubles such a base, up to maxRaise times, and fails
	// a base that is still too small, so that its test raises n. It is
	// twice Floor, well below the 5 ms and more a test's base is chosen
	// to take: a quadratic parser from a 2 ms base takes ×64 all the
	// same, and a base that a loaded host runs a little faster than usual
	// is neither raised nor refused by chance (at 5 ms, a base of 4.1 ms
	// was refused once, and a raised base once grew a capped input past
	// the plane's frame).
	MinBase = 2 * Floor
	// maxRaise is how many times Linear may double a base that runs under
	// MinBase. A test sizes its inputs' memory from its base: a base
	// raised further than 4× belongs in the test.
	maxRaise = 2
	// calibrations is how many runs of the base size (after a warm-up)
	// decide, by their median, whether it takes MinBase.
	calibrations = 3
	// gcHeadroom is how much the heap may grow past the prefaulted pages
	// before the collector runs in the middle of a run, so that a
	// quadratic parser that allocates as it goes still finishes (and
	// fails).
	gcHeadroom = 512 << 20
	// minTouched is how much heap Linear touches before timing, at
	// least: see prefault.
	minTouched = 256 << 20
	// MaxRunAlloc is the most one run may allocate. Before each size's
	// first run Linear makes sure that allocGrowth times what the smaller
	// size's run allocated is at most half the heap touched before
	// timing, and collects garbage before a run once less than half of it
	// is left, so that every run allocates on pages touched already. A
	// run that touched pages first would pay for them by chance:
	// SplitList's 8n, allocating 320 MiB per run on 256 MiB touched, took
	// ×6.9 the time of 4n in one CI run and ×2.5 in others. MaxRunAlloc
	// bounds the memory a test may take (twice it, touched): a test whose
	// runs allocate more cuts its repeats or its base.
	MaxRunAlloc = 1 << 30
	// allocGrowth is the most a run's allocations may grow when its
	// input doubles: a linear parser's grow about ×2, and slices grown by
	// append and rounded to size classes add steps (Sender's quoted names
	// ×2.6 once); a quadratic one's ×4.
	allocGrowth = 3.0
	// sizes is how many times the base is doubled: n, 2n, 4n, 8n.
	sizes = 4
)

// Linear times setup(n)'s run at n = base, 2·base, 4·base and 8·base and
// fails t if 8·base takes more than Span times what base does. setup builds
// the input and is not timed; run parses it and may be called many times.
// The times are logged (go test -v) so that they can be compared. A base
// whose run takes less than MinBase of CPU is doubled, at most maxRaise
// times, and fails t if it is still too small: choose one that makes the
// runs of a linear parser take 5 ms or more.
//
// Under the race detector Linear skips: the detector's shadow memory and
// bookkeeping grow with the memory a run touches, so its runs slow down
// faster than the input grows (×2.7 for each doubling of a linear decoder
// on a 2-core host) and it would measure itself, not the parser. `make
// unit` runs every Test…Linear again without it.
func Linear(t testing.TB, name string, setup func(n int) (run func()), base int) {
	t.Helper()
	SkipUnderRace(t)
	if base <= 0 {
		t.Fatalf("%s: base size %d", name, base)
	}
	m := measure{setup: setup, base: base, times: make([]time.Duration, sizes), runs: make([]func(), sizes), allocs: make([]uint64, sizes)}
	defer m.quietGC(minTouched)()
	if m.times[0] = m.calibrate(); m.times[0] < MinBase {
		t.Fatalf("%s: base n=%d took %v of CPU at n=%d (doubled %d times), less than %v: such a base measures noise; raise it",
			name, base, m.times[0], m.base, maxRaise, MinBase)
	}
	// Each larger size runs once, in turn: its warm-up, and the measure
	// of what it allocates, so that the pages its runs need are touched
	// before any run is timed.
	for i := 1; i < sizes; i++ {
		want := uint64(allocGrowth * float64(m.allocs[i-1]))
		if want > MaxRunAlloc {
			t.Fatalf("%s: a run at n=%d may allocate %d MiB, more than %d MiB; cut the repeats or the base; %s",
				name, m.base<<i, want>>20, MaxRunAlloc>>20, m.report())
		}
		if 2*want > m.touched {
			defer m.quietGC(2 * want)()
		}
		m.times[i] = m.run(i)
		// Allocations that outgrow want are superlinear, and would have
		// run past the touched pages. Under minTouched/2 they stay within
		// them whatever their growth, and small ones vary with what else
		// the process does (a server goroutine's buffers).
		if m.allocs[i] > max(want, minTouched/2) {
			t.Fatalf("%s: a run at n=%d allocated %d MiB, ×%.1f what n=%d did (most allowed ×%.0f); %s",
				name, m.base<<i, m.allocs[i]>>20, float64(m.allocs[i])/float64(m.allocs[i-1]), m.base<<(i-1), allocGrowth, m.report())
		}
	}
	// One run may be slowed by chance (a cache, a page, the other core);
	// the median of the pairs cannot be, by ×3 against ×8. Where it says
	// superlinear, n and 8n are run in turn again, twice as often, and
	// their median ratio decides.
	last := sizes - 1
	span := m.span(last, pairs, 3)
	if span > Span {
		span = m.span(last, 2*pairs, 2*pairs)
	}
	if span > Span {
		t.Fatalf("%s: n=%d took %v, n=%d took %v: ×%.1f for %d times the input (most allowed ×%.0f); %s",
			name, m.base, m.times[0], m.base<<last, m.times[last], span, 1<<last, Span, m.report())
	}
	t.Logf("%s: %s", name, m.report())
}

// quietGC touches bytes of heap (prefault) and keeps the collector
// from running during the timed runs unless the heap grows by gcHeadroom
// past them; it returns what restores the collector. A collection in the
// middle of a run costs in proportion to everything live, the inputs of
// all four sizes included, and comes at times that vary from one run to
// the next: noise, not the parser's cost. The headroom still lets a
// quadratic parser that allocates as it goes finish (and fail).
func (m *measure) quietGC(bytes uint64) (restore func()) {
	prefault(bytes)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapBase, m.touched = ms.HeapAlloc, bytes
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(int64(ms.HeapAlloc + bytes + gcHeadroom))
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

// prefault touches bytes of heap and lets them go: the runtime keeps the
// freed memory (the memory limit quietGC sets is above it, so the
// scavenger does not return it), and the runs that follow allocate pages
// that exist already. A page a process touches first can cost far more
// than the parser's work on it (on a virtual machine whose memory the
// host backs only on first use, milliseconds for a few megabytes), and
// which runs would pay it is chance: a linear parser then looked
// superlinear.
func prefault(bytes uint64) {
	b := make([]byte, bytes)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
}

type measure struct {
	setup func(int) func()
	base  int
	runs  []func()        // made when a size is first run, so a failure stops early
	times []time.Duration // each size's time: its one run, or for n and 8n their median in the last span
	// heapBase is the live heap after the last quietGC, and touched
	// the bytes it touched.
	heapBase, touched uint64
	// allocs is the most that one run of each size allocated.
	allocs []uint64
}

// calibrate returns the base size's median time, after doubling the
// base (at most maxRaise times) while that is under MinBase.
func (m *measure) calibrate() time.Duration {
	for raised := 0; ; raised++ {
		m.run(0) // a warm-up
		var ds []time.Duration
		for range calibrations {
			ds = append(ds, m.run(0))
		}
		if d := median(ds); d >= MinBase || raised == maxRaise {
			return d
		}
		// The next size's input, if made, is the new base's.
		m.base *= 2
		m.runs, m.allocs = append(m.runs[1:], nil), append(m.allocs[1:], 0)
	}
}

// span runs the base and size i in turn, pairs times at most and least
// times at least (more only while the runs took under sizeBudget), and
// returns the median of the pairs' ratios (times under Floor counted as
// Floor), keeping each size's median time for the report.
func (m *measure) span(i, pairs, least int) float64 {
	var rs []float64
	var small, large []time.Duration
	spent := time.Duration(0)
	for p := 0; p < pairs && (p < least || spent < sizeBudget); p++ {
		a, b := m.run(0), m.run(i)
		rs, small, large = append(rs, ratio(a, b)), append(small, a), append(large, b)
		spent += a + b
	}
	m.times[0], m.times[i] = median(small), median(large)
	return median(rs)
}

// run runs size i once and returns the CPU time it took.
func (m *measure) run(i int) time.Duration {
	if m.runs[i] == nil {
		m.runs[i] = m.setup(m.base << i)
	}
	// Garbage of earlier runs is not this run's cost: it is collected
	// before a run once the run could allocate past the prefaulted pages.
	// Not before every run: a collection also shrinks the goroutine's
	// stack, and a deep parse then paid for growing it again on fresh
	// memory, by chance.
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > m.heapBase+m.touched/2 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
	}
	allocated := ms.TotalAlloc
	start := cpuTime()
	m.runs[i]()
	d := cpuTime() - start
	runtime.ReadMemStats(&ms)
	m.allocs[i] = max(m.allocs[i], ms.TotalAlloc-allocated)
	return d
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

// SkipUnderRace skips a test that holds something to a time (Linear, a
// latency bound under load) in a build with the race detector, which
// slows what it times by more than the bound allows, or whose flood of
// requests the detector would slow in this process and check nothing of
// in the binary it floods. `make unit` runs such tests (Test…Linear,
// TestFairShares…, plane's TestEvidenceRefusalFlood) again without it.
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if raceDetector {
		t.Skip("timed only without the race detector (make unit runs it again without -race)")
	}
}

// Repeat returns run repeated reps times (once for reps < 1). A parse
// that stops at a bound (a line or header cap) takes microseconds whatever
// n is, under MinBase; repeated a fixed number of times, its base is
// measurable and its times still flat, or linear, in n.
func Repeat(reps int, run func()) func() {
	return func() {
		for range max(reps, 1) {
			run()
		}
	}
}
