package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
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
	peer := func(rate, p99 float64) *Load { l := load(rate, p99); l.Label = "peer"; return &l }
	r.add(Pair{Section: "ingest", Store: "embedded", Path: "POST /emails", Size: "512 B", Conc: 8, Mailplane: load(6000, 3), Baseline: load(10000, 1), Peer: peer(1500, 20)})
	r.add(Pair{Section: "ingest", Store: "embedded", Path: "POST /emails", Size: "100 KiB", Conc: 8, Mailplane: load(160, 30), Baseline: load(1000, 3)})
	r.add(Pair{Section: "ingest", Store: "embedded", Path: planeSend, Size: "512 B", Conc: 8, Mailplane: load(4900, 3), Baseline: load(10000, 1)})
	r.add(Pair{Section: "ingest", Store: "embedded", Path: smtpPath(1), Size: "512 B", Conc: 8, Mailplane: load(400, 9), Baseline: load(1000, 2), Peer: peer(300, 8)})
	r.add(Pair{Section: "ingest", Store: "embedded", Path: smtpPath(50), Size: "512 B", Conc: 8, Mailplane: load(400, 9), Baseline: load(1000, 2)})
	r.add(Pair{Section: "ingest", Store: "Mailpit", Path: smtpPath(50), Size: "512 B", Conc: 8, Mailplane: load(900, 4), Baseline: load(1000, 3)})
	r.add(Pair{Section: "reads", Store: "embedded", Path: "list of 32", Conc: 1, Mailplane: load(800, 4.9), Baseline: load(1500, 1)})
	r.add(Pair{Section: "reads", Store: "embedded", Path: "wait wake-up", Conc: 1, Mailplane: load(0, 12), Baseline: load(0, 1)})
	r.Startup = []Startup{newStartup("up", []float64{90, 70, 310})}
	for _, p := range stackProcs {
		r.Memory = append(r.Memory, MemoryRow{Process: p, IdleKiB: 9000, IdleAnonKiB: 2000, IdleFileKiB: 7000, IdlePSSKiB: 8000, LoadedKiB: 12000})
	}
	// The supervisor is shown, not counted: with it, 46.1 MB RSS.
	r.Memory = append(r.Memory, MemoryRow{Process: supervisorProc, IdleKiB: 9000, IdlePSSKiB: 5000, LoadedKiB: 9000})
	lv := func(when string, live int, pss int64, procs int) StackLevel {
		return StackLevel{When: when, LiveTrials: live, PSSKiB: pss, PSSAnonKiB: pss / 2, RSSKiB: pss + 1000, Processes: procs,
			PerProcess: []ProcMem{{Process: "mail-plane up", PSSKiB: pss / 2}, {Process: "mail-plane serve", PSSKiB: pss / 2}}}
	}
	r.Density = &Density{
		Levels: []StackLevel{lv("0 live trials", 0, 50000, 5), lv("1000 live trials", 1000, 80000, 5),
			lv("10000 live trials", 10000, 1050000, 5), lv("10000 live, after 10000 episodes", 10000, 1060000, 5)},
		PerTrialMidKi: 30, PerTrialKiB: 100, // 102.4 KB: just over the goal
		Open:        Latency{N: 10000, P50: 1, P99: 4.9},
		OpenFirst:   Latency{N: 1000, P50: 1, P99: 3},
		Episodes:    Load{Ops: 10000, Rate: 300, P50: 10, P99: 30},
		ProcsBefore: 5, ProcsAfter: 5, OpenAfter: 10000,
		Reference: &Reference{Python: "CPython 3", Trials: 1000, PerTrialPSS: 70, Open: Latency{N: 1000, P50: 1.6, P99: 4.2}},
	}
	r.add(Pair{Section: "density", Store: "embedded", Path: "trial open, 0 to 1,000 live", Conc: 1, Mailplane: load(900, 3), Baseline: load(600, 4.2)})
	r.finish()
	return r
}

func TestGoals(t *testing.T) {
	met := map[string]bool{}
	for _, g := range sample().Goals {
		met[g.Goal] = g.Met
	}
	want := map[string]bool{
		"POST /emails, 512 B, concurrency 8: ≥ 25% of the x":                                 true,  // 60%
		"POST /emails, 100 KiB, concurrency 8: ≥ 15% of the x":                               true,  // 16%
		"plane send RPC, 512 B, concurrency 8: ≥ 50% of the x":                               false, // 49%
		"SMTP 1/conn, 512 B, concurrency 8: ≥ 60% of the x":                                  false, // 40%
		"SMTP 50/conn, 512 B, concurrency 8: ≥ 40% of the x":                                 true,  // 40%
		"Mailpit store, SMTP 50/conn, 512 B, concurrency 8: ≥ 80% of x":                      true,  // 90%
		"list of 32 p99 < 5 ms (embedded store, one reader)":                                 true,
		"wait wake-up p99 < 10 ms (embedded store)":                                          false,
		"mail-plane up healthy < 300 ms":                                                     false, // the worst run counts
		"plane + 3 surfaces idle < 40 MB resident":                                           true,  // 36.9 MB
		"whole stack (up, plane, 3 surfaces) ≤ 100 KB per live trial at 10,000 trials (PSS)": false, // 102.4 KB
		"trial.open over the RPC: p99 ≤ 5 ms":                                                true,
		"processes constant in the number of trials":                                         true,
		"POST /emails, 512 B, concurrency 8: ≥ 3.0× peer":                                    true,  // 4×
		"SMTP 1/conn, 512 B, concurrency 8: ≥ 2.0× peer":                                     false, // 1.33×
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
	for _, s := range []string{"## Goals", "| POST /emails | 512 B | 8 | 6000 |", "**no**", "![throughput and p99 per path](bench.png)",
		"## Ingest, embedded store vs raw Mailpit (the peer)", "| POST /emails | 512 B | 8 | 6000 | 3.00 | peer | 1500 | 20.00 | 4.00× |",
		"| SMTP 1/conn | 512 B | 8 | 400 | 9.00 | peer | 300 | 8.00 | 1.33× |",
		"## Density", "| mailplane: 10000 live trials | 10,000 | 1075.2 | 537.6 | 1076.2 | 5 | 0 | **102.4** | 51.2 |", "| reference (CPython 3 process) | 1,000 |",
		"| trial open, 0 to 1,000 live | 1 | 900 |", "| processes (up and its tree) | 5 | 5 |",
		"| **plane + 3 surfaces** | **36.9** | 8.2 | 28.7 | 32.8 | **49.2** |", "| whole `mail-plane up` tree (with the supervisor) | | | | 37.9 |",
		"| 36.9 MB RSS (8.2 MB anonymous, 28.7 MB file-backed); PSS 32.8 MB, with mail-plane up's supervisor 37.9 MB | yes |"} {
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

func TestProcessesConstant(t *testing.T) {
	d := sample().Density
	if !d.processesConstant() {
		t.Fatal("5 processes everywhere is not constant")
	}
	d.Levels[2].Processes = 6
	if d.processesConstant() {
		t.Error("a level with 6 processes is constant")
	}
	d.Levels[2].Processes = 5
	d.ProcsAfter = 7
	if d.processesConstant() {
		t.Error("7 processes after the episodes is constant")
	}
	if (&Density{}).processesConstant() {
		t.Error("no figure is constant")
	}
}

func TestParseRollup(t *testing.T) {
	const s = `55f0c0a00000-7ffd1d7fe000 ---p 00000000 00:00 0                          [rollup]
Rss:               11764 kB
Pss:                6123 kB
Pss_Dirty:          2216 kB
Pss_Anon:           2212 kB
Pss_File:           3907 kB
Shared_Clean:      10136 kB
`
	r, err := parseRollup(s)
	if err != nil || r != (rollup{RSS: 11764, PSS: 6123, PSSAnon: 2212}) {
		t.Fatalf("parseRollup = %+v, %v; want 11764, 6123, 2212", r, err)
	}
	if r, err := parseRollup("Rss: 1 kB\nPss: 2 kB\n"); err != nil || r != (rollup{RSS: 1, PSS: 2}) {
		t.Errorf("without Pss_Anon (kernels before 5.9): %+v, %v", r, err)
	}
	if _, err := parseRollup("Rss: 1 kB\n"); err == nil {
		t.Error("no Pss line, no error")
	}
	if _, err := parseRollup("Rss: 1 kB\nPss: x kB\n"); err == nil {
		t.Error("a Pss that is not a number, no error")
	}
}

func TestParseStatAndTree(t *testing.T) {
	p, ok := parseStat("4242 (mail (plane)) S 4200 4242 4200 0 -1")
	if !ok || p.comm != "mail (plane)" || p.ppid != 4200 {
		t.Fatalf("parseStat = %+v, %v", p, ok)
	}
	if _, ok := parseStat("4243 (gone) Z 4242 0"); ok {
		t.Error("a zombie is a living process")
	}
	procs := map[int]procInfo{
		1: {"init", 0}, 10: {"mail-plane", 1}, 12: {"mail-writer", 10}, 11: {"mail-plane", 10},
		13: {"helper", 12}, 20: {"other", 1},
	}
	got := treeOf(procs, 10)
	want := []int{10, 11, 12, 13}
	if !slices.Equal(got, want) {
		t.Errorf("treeOf = %v, want %v", got, want)
	}
	if treeOf(procs, 99) != nil {
		t.Error("the tree of a process that is gone")
	}
}

func TestPerTrialAndThousands(t *testing.T) {
	if got := perTrial(1000, 71000, 1000); got != 70 {
		t.Errorf("perTrial = %v, want 70", got)
	}
	if got := perTrial(1000, 2000, 0); got != 0 {
		t.Errorf("perTrial over no trial = %v", got)
	}
	if got := kb(100); got != 102.4 {
		t.Errorf("kb(100) = %v", got)
	}
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseReference(t *testing.T) {
	ns := make([]int64, 100)
	for i := range ns {
		ns[i] = int64(i+1) * 1e6 // 1 … 100 ms
	}
	line, _ := json.Marshal(map[string]any{
		"python": "CPython 3.11.7", "trials": 100, "live_threads": 301, "warmup_open_ns": 5e6,
		"open_ns": ns, "open_elapsed_ns": 6e9,
		"before": map[string]any{"rss_kib": 20000, "pss_kib": 18000, "threads": 1, "mailpit": map[string]any{"rss_kib": 1, "pss_kib": 1}},
		"after":  map[string]any{"rss_kib": 27100, "pss_kib": 25000, "threads": 301, "mailpit": nil},
	})
	r, err := parseReference(line, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r.PerTrialPSS != 70 || r.PerTrialRSS != 71 || r.Threads != 301 || r.After.Threads != 301 {
		t.Errorf("per trial %v KiB PSS, %v RSS, %d threads", r.PerTrialPSS, r.PerTrialRSS, r.Threads)
	}
	if r.Open.P50 != 50 || r.Open.P99 != 99 || r.Open.Max != 100 || r.OpenSeconds != 6 || r.WarmupOpenMs != 5 {
		t.Errorf("open %+v, %v s, warm-up %v ms", r.Open, r.OpenSeconds, r.WarmupOpenMs)
	}
	if r.Before.Mailpit == nil || r.After.Mailpit != nil {
		t.Errorf("Mailpit sizes %+v %+v", r.Before.Mailpit, r.After.Mailpit)
	}
	if _, err := parseReference(line, 1000); err == nil {
		t.Error("100 trials where 1000 were asked, no error")
	}
	if _, err := parseReference([]byte("Traceback"), 100); err == nil {
		t.Error("no JSON, no error")
	}
}

func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), bytes.Repeat([]byte("x"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	got, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	// 64 KiB once (the hard link is the same inode), plus the directories.
	if got < 64 || got > 64+64 {
		t.Errorf("diskUsage = %d KiB, want 64 KiB and the directories'", got)
	}
}

func TestCountLoadGoesOnAfterFailures(t *testing.T) {
	var mu sync.Mutex
	n := 0
	mk := func(int) (worker, error) {
		return worker{do: func() (time.Duration, error) {
			mu.Lock()
			defer mu.Unlock()
			n++
			if n%10 == 0 {
				return 0, errors.New("boom")
			}
			return time.Millisecond, nil
		}}, nil
	}
	l, err := countLoad(context.Background(), 50, 3, mk)
	if err != nil || n != 50 || l.Ops != 45 || l.Errors != 5 || l.FirstErr != "boom" || l.Rate <= 0 {
		t.Errorf("countLoad: %d calls, %+v, %v", n, l, err)
	}
}

func TestPprofTop(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pprof")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pprofTop(empty); err == nil {
		t.Error("an empty profile passed")
	}
	path := filepath.Join(dir, "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	pprof.StopCPUProfile()
	f.Close()
	top, err := pprofTop(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"# go tool pprof -top -flat -nodecount=40 cpu.pprof\n", "# go tool pprof -top -cum -nodecount=40 cpu.pprof\n", "Type: cpu", "flat%"} {
		if !strings.Contains(string(top), s) {
			t.Errorf("pprof -top text lacks %q:\n%s", s, top)
		}
	}
}

// Each watched figure is compared with the previous run's, and one more
// than 10% worse fails its goal.
func TestRegressionGoals(t *testing.T) {
	prev := sample()
	prev.Machine.Commit = "abc1234"
	js, err := json.Marshal(prev)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := readReport(filepath.Join(t.TempDir(), "none.json")); r != nil || err != nil {
		t.Fatalf("no previous run: %v, %v", r, err)
	}
	r := sample()
	if r.previous, err = readReport(path); err != nil {
		t.Fatal(err)
	}
	for i, p := range r.Pairs {
		if p.Path == "wait wake-up" {
			r.Pairs[i].Mailplane.P99 = 14 // 12 → 14: +17%
		}
	}
	r.Startup = []Startup{newStartup("up", []float64{90, 70, 320})} // 310 → 320: +3%
	r.Goals = nil
	r.finish()
	met := map[string]Goal{}
	for _, g := range r.Goals {
		met[g.Goal] = g
	}
	for goal, want := range map[string]bool{
		"wait wake-up p99 (embedded store): at most 10% worse than the previous run":           false,
		"list of 32 p99 (embedded store, one reader): at most 10% worse than the previous run": true,
		"mail-plane up healthy, slowest run: at most 10% worse than the previous run":          true,
		"whole stack per live trial (PSS): at most 10% worse than the previous run":            true,
	} {
		g, ok := met[goal]
		if !ok {
			t.Errorf("goal %q missing", goal)
			continue
		}
		if g.Met != want {
			t.Errorf("goal %q met = %v, want %v (%s)", goal, g.Met, want, g.Figure)
		}
	}
	if g := met["wait wake-up p99 (embedded store): at most 10% worse than the previous run"]; g.Figure != "14.00 ms (previous run, commit abc1234: 12.00 ms; +17%)" {
		t.Errorf("figure %q", g.Figure)
	}
	if n := len(sample().Goals); n != len(r.Goals)-4 {
		t.Errorf("without a previous run %d goals, with one %d: want 4 more", n, len(r.Goals))
	}
}

func TestParseCPU(t *testing.T) {
	// A command name with spaces and a parenthesis; utime 150, stime 25.
	line := "4242 (mail plane) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 12 0 100 0 0\n"
	got, err := parseCPU(line)
	if err != nil || got != 1750*time.Millisecond {
		t.Fatalf("parseCPU: %v, %v", got, err)
	}
	if _, err := parseCPU("4242 (short) S 1 2"); err == nil {
		t.Fatal("a short line parsed")
	}
	// The real file reads (its value may still be 0 ticks).
	if _, err := cpuTime(os.Getpid()); err != nil {
		t.Fatalf("this process's CPU time: %v", err)
	}
}
