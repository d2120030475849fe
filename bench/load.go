package main

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Load is one measured side of a figure: how many operations, how fast,
// how slow. Latencies are of successful operations only; failures are
// counted apart and the first one is kept to explain them.
type Load struct {
	Label    string  `json:"label"`
	Ops      int     `json:"ops"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"ops_per_s"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	FirstErr string  `json:"first_error,omitempty"`

	lat []time.Duration
}

// op is one operation; it returns how long the part that counts took (so
// that a worker can leave set-up, such as a reconnect, out of it).
type op func() (time.Duration, error)

// worker is one client's loop: newWorker makes its state (a connection),
// do runs one operation, close releases it.
type worker struct {
	do    op
	close func()
}

// workerFactory makes the worker for index i of a side.
type workerFactory func(i int) (worker, error)

// timed runs f and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	t := time.Now()
	err := f()
	return time.Since(t), err
}

// errorPause keeps a worker whose operations fail from spinning.
const errorPause = 10 * time.Millisecond

// side is a set of workers kept across the rounds of one figure, so that
// connections live on between rounds as a real client's would.
type side struct {
	load    Load
	workers []worker
}

func newSide(label string, conc int, mk workerFactory) (*side, error) {
	s := &side{load: Load{Label: label}}
	for i := range conc {
		w, err := mk(i)
		if err != nil {
			s.close()
			return nil, err
		}
		s.workers = append(s.workers, w)
	}
	return s, nil
}

func (s *side) close() {
	for _, w := range s.workers {
		if w.close != nil {
			w.close()
		}
	}
}

// run drives every worker for d; when record is false (warm-up) nothing is
// kept.
func (s *side) run(ctx context.Context, d time.Duration, record bool) {
	end := time.Now().Add(d)
	lats := make([][]time.Duration, len(s.workers))
	errs := make([]int, len(s.workers))
	first := make([]error, len(s.workers))
	var wg sync.WaitGroup
	start := time.Now()
	for i, w := range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				lat, err := w.do()
				if err != nil {
					errs[i]++
					if first[i] == nil {
						first[i] = err
					}
					time.Sleep(errorPause)
					continue
				}
				lats[i] = append(lats[i], lat)
			}
		}()
	}
	wg.Wait()
	if !record {
		return
	}
	s.load.Seconds += time.Since(start).Seconds()
	for i := range s.workers {
		s.load.lat = append(s.load.lat, lats[i]...)
		s.load.Errors += errs[i]
		if first[i] != nil && s.load.FirstErr == "" {
			s.load.FirstErr = first[i].Error()
		}
	}
}

// finish turns the samples into the figure.
func (l *Load) finish() {
	l.Ops = len(l.lat)
	if l.Seconds > 0 {
		l.Rate = float64(l.Ops) / l.Seconds
	}
	l.P50 = ms(percentile(l.lat, 50))
	l.P99 = ms(percentile(l.lat, 99))
}

// add records one latency (for figures not driven by side.run).
func (l *Load) add(d time.Duration) { l.lat = append(l.lat, d) }

// percentile is the nearest-rank p-th percentile (0 < p <= 100).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Rounds and warm-up of a paired figure: the two sides take turns, so that
// whatever else the machine does weighs on both alike.
const (
	rounds = 4
	warmup = 200 * time.Millisecond
)

// pair measures mailplane next to its baseline: both warmed up, then
// rounds turns of d/rounds each, baseline first.
func pair(ctx context.Context, d time.Duration, conc int, subjLabel string, subj workerFactory, baseLabel string, base workerFactory) (Load, Load, error) {
	l, err := turns(ctx, d, conc, sideSpec{baseLabel, base}, sideSpec{subjLabel, subj})
	if err != nil {
		return Load{}, Load{}, err
	}
	return l[1], l[0], ctx.Err()
}

// sideSpec is one side of a figure: its label and its workers.
type sideSpec struct {
	label string
	mk    workerFactory
}

// turns measures every side at conc: each warmed up, then rounds turns of
// d/rounds each, in the order given, so that whatever else the machine
// does weighs on each alike. The loads come back in the same order.
func turns(ctx context.Context, d time.Duration, conc int, specs ...sideSpec) ([]Load, error) {
	var sides []*side
	defer func() {
		for _, s := range sides {
			s.close()
		}
	}()
	for _, sp := range specs {
		s, err := newSide(sp.label, conc, sp.mk)
		if err != nil {
			return nil, err
		}
		sides = append(sides, s)
	}
	for _, s := range sides {
		s.run(ctx, warmup, false)
	}
	for range rounds {
		for _, s := range sides {
			s.run(ctx, d/rounds, true)
		}
	}
	out := make([]Load, len(sides))
	for i, s := range sides {
		s.load.finish()
		out[i] = s.load
	}
	return out, ctx.Err()
}
