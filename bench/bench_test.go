package main

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(101-i)*time.Millisecond) // unsorted on purpose
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.5, time.Millisecond}} {
		if got := percentile(d, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if d[0] != 100*time.Millisecond {
		t.Error("percentile sorted its input in place")
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v", got)
	}
}

func TestLogScale(t *testing.T) {
	s := newLogScale([]float64{0, 37, 14000}, 100, 400)
	if s.lo != 10 || s.hi != 100000 {
		t.Fatalf("decades %v..%v, want 10..100000", s.lo, s.hi)
	}
	if got := s.x(1000); got != 300 {
		t.Errorf("x(1000) = %d, want 300 (two of four decades)", got)
	}
	if got := len(s.decades()); got != 5 {
		t.Errorf("%d ticks, want 5", got)
	}
}

func TestBodySizes(t *testing.T) {
	for _, n := range []int{512, 100 << 10} {
		b := bodyText(n)
		if len(b) != n {
			t.Errorf("bodyText(%d) has %d bytes", n, len(b))
		}
		for _, line := range strings.Split(b, "\n") {
			if len(line) > 998 {
				t.Fatalf("a line of %d bytes: SMTP refuses it", len(line))
			}
		}
	}
}

// sample is a report as a run would leave it.
func sample() *Report {
	r := newReport(time.Second, "")
	load := func(rate, p99 float64) Load { return Load{Label: "x", Rate: rate, P50: p99 / 2, P99: p99, Ops: 10} }
	r.add(Pair{Section: "ingest", Store: "embedded", Path: "POST /emails", Size: "512 B", Conc: 8, Mailplane: load(6000, 3), Baseline: load(10000, 1)})
	r.add(Pair{Section: "ingest", Store: "embedded", Path: smtpPath(1), Size: "512 B", Conc: 8, Mailplane: load(400, 9), Baseline: load(1000, 2)})
	r.add(Pair{Section: "ingest", Store: "Mailpit", Path: smtpPath(50), Size: "512 B", Conc: 8, Mailplane: load(900, 4), Baseline: load(1000, 3)})
	r.add(Pair{Section: "reads", Store: "embedded", Path: "list of 32", Conc: 1, Mailplane: load(800, 4.9), Baseline: load(1500, 1)})
	r.add(Pair{Section: "reads", Store: "embedded", Path: "wait wake-up", Conc: 1, Mailplane: load(0, 12), Baseline: load(0, 1)})
	r.Startup = []Startup{newStartup("up", []float64{90, 70, 310})}
	for _, p := range []string{"mail-plane serve", "mail-writer", "mail-inbox", "mail-gateway"} {
		r.Memory = append(r.Memory, MemoryRow{Process: p, IdleKiB: 9000, LoadedKiB: 12000})
	}
	r.Density = &Density{Trials: 200, PlaneOneKiB: 20000, PlaneManyKiB: 30000, PerTrialKiB: 10000.0 / 199}
	r.finish()
	return r
}

func TestGoals(t *testing.T) {
	met := map[string]bool{}
	for _, g := range sample().Goals {
		met[g.Goal] = g.Met
	}
	want := map[string]bool{
		"POST /emails, 512 B, concurrency 8: ≥ 50% of the x":            true,  // 60%
		"SMTP 1/conn, 512 B, concurrency 8: ≥ 50% of the x":             false, // 40%
		"Mailpit store, SMTP 50/conn, 512 B, concurrency 8: ≥ 80% of x": true,  // 90%
		"list of 32 p99 < 5 ms (embedded store, one reader)":            true,
		"wait wake-up p99 < 10 ms (embedded store)":                     false,
		"mail-plane up healthy < 300 ms":                                false, // the worst run counts
		"plane + 3 surfaces idle < 40 MB resident":                      true,  // 36.9 MB
		"each extra trial < 100 KB of plane memory":                     true,  // 51.5 KB
	}
	for goal, w := range want {
		got, ok := met[goal]
		if !ok {
			t.Errorf("goal %q missing; have %v", goal, met)
			continue
		}
		if got != w {
			t.Errorf("goal %q met = %v, want %v", goal, got, w)
		}
	}
}

func TestOutputs(t *testing.T) {
	r := sample()
	md := r.markdown()
	for _, s := range []string{"## Goals", "| POST /emails | 512 B | 8 | 6000 |", "**no**", "![throughput and p99 per path](bench.png)"} {
		if !strings.Contains(md, s) {
			t.Errorf("bench.md lacks %q", s)
		}
	}
	var buf bytes.Buffer
	if err := drawChart(&buf, r); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != chartWidth {
		t.Errorf("chart is %d wide", img.Bounds().Dx())
	}
	// Some of mailplane's bars are drawn.
	n := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r>>8 == uint32(colMailplane.R) && g>>8 == uint32(colMailplane.G) && b>>8 == uint32(colMailplane.B) {
				n++
			}
		}
	}
	if n < 100 {
		t.Errorf("only %d pixels of mailplane's colour", n)
	}
}
