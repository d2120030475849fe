package itest

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Latencies collects per-operation durations from concurrent workers and
// reports them as benchmark metrics.
type Latencies struct {
	mu    sync.Mutex
	d     []time.Duration
	start time.Time
}

// NewLatencies starts the wall clock for throughput.
func NewLatencies() *Latencies { return &Latencies{start: time.Now()} }

// Time runs op and records how long it took.
func (l *Latencies) Time(op func() error) error {
	t := time.Now()
	err := op()
	d := time.Since(t)
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
	return err
}

// Percentile returns the p-th percentile (0 < p <= 100).
func (l *Latencies) Percentile(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Report adds ops/s, p50 and p99 (in microseconds) to b's results.
func (l *Latencies) Report(b *testing.B) {
	l.mu.Lock()
	n, elapsed := len(l.d), time.Since(l.start)
	l.mu.Unlock()
	b.ReportMetric(float64(n)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(l.Percentile(50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(l.Percentile(99).Microseconds()), "p99-µs")
}
