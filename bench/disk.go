package main

import (
	"os"
	"slices"
	"time"
)

// fsyncRounds is how many flushes measureFsync times.
const fsyncRounds = 300

// Fsync is how long the disk under the run's data takes to make a write
// durable: the floor of every durable send's latency. A send is answered
// only after its group commit's fsync, so a plane cannot answer more than
// conc / fsync sends a second to conc clients that each wait for their
// answer, whatever its CPU does.
type Fsync struct {
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// measureFsync writes a WAL-frame-sized block and fsyncs it, fsyncRounds
// times, in dir.
func measureFsync(dir string) (Fsync, error) {
	f, err := os.CreateTemp(dir, "fsync")
	if err != nil {
		return Fsync{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 3*4096)
	took := make([]time.Duration, 0, fsyncRounds)
	for i := range fsyncRounds {
		if _, err := f.WriteAt(block, int64(i*len(block))); err != nil {
			return Fsync{}, err
		}
		start := time.Now()
		if err := f.Sync(); err != nil {
			return Fsync{}, err
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	ms := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))]) / float64(time.Millisecond) }
	return Fsync{P50Ms: ms(0.50), P99Ms: ms(0.99)}, nil
}
