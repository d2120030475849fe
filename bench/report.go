package main

import (
	"bufio"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Report is every figure of one run; bench.json is this, bench.md and
// bench.png are drawn from it.
type Report struct {
	Machine  Machine      `json:"machine"`
	Command  string       `json:"command"`
	Started  time.Time    `json:"started"`
	Seconds  float64      `json:"seconds"`
	Cell     string       `json:"cell"`
	Pairs    []Pair       `json:"pairs"`
	Startup  []Startup    `json:"startup"`
	Memory   []MemoryRow  `json:"memory"`
	Density  *Density     `json:"density,omitempty"`
	Netns    *NetnsOpen   `json:"netns,omitempty"`
	Faults   *Faults      `json:"faults,omitempty"`
	Console  *ConsolePage `json:"console,omitempty"`
	Webhooks *HookBench   `json:"webhooks,omitempty"`
	Goals    []Goal       `json:"goals"`
	Notes    []string     `json:"notes,omitempty"`
	Failures []string     `json:"failures,omitempty"`

	busyAtStart float64 // CPU seconds of the whole machine when the run started
	// previous is the run this one is compared with (bench.json of the
	// output directory before this run wrote it), if any.
	previous *Report
}

// Machine is what the run ran on.
type Machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
	Commit    string  `json:"commit"`
	Mailpit   string  `json:"mailpit"`
	// LoadAvg is /proc/loadavg when the run started, and OtherCPU the
	// share of the machine's CPU time that processes other than this run's
	// used while it ran: figures from a busy machine are not comparable
	// with a quiet one's.
	LoadAvg  string  `json:"loadavg"`
	OtherCPU float64 `json:"other_cpu_pct"`
	// Fsync is the disk's flush under the run's data (disk.go).
	Fsync Fsync `json:"fsync"`
}

// Pair is a figure of mailplane next to its baseline from the same run.
type Pair struct {
	Section   string  `json:"section"` // ingest, reads, density
	Store     string  `json:"store"`   // embedded or Mailpit
	Path      string  `json:"path"`
	Size      string  `json:"size,omitempty"`
	Conc      int     `json:"concurrency"`
	Mailplane Load    `json:"mailplane"`
	Baseline  Load    `json:"baseline"`
	Pct       float64 `json:"pct_of_baseline"` // 100 × mailplane's rate / the baseline's
	// Peer is raw Mailpit on the same path, taking turns with both (the
	// embedded store's ingest figures); PeerRatio is mailplane's rate over
	// its.
	Peer      *Load   `json:"peer,omitempty"`
	PeerRatio float64 `json:"ratio_to_peer,omitempty"`
}

func (p Pair) errNote() string {
	peer := 0
	if p.Peer != nil {
		peer = p.Peer.Errors
	}
	if p.Mailplane.Errors+p.Baseline.Errors+peer == 0 {
		return ""
	}
	s := fmt.Sprintf("errors: mailplane %d (%s), baseline %d (%s)", p.Mailplane.Errors, p.Mailplane.FirstErr, p.Baseline.Errors, p.Baseline.FirstErr)
	if peer > 0 {
		s += fmt.Sprintf(", peer %d (%s)", peer, p.Peer.FirstErr)
	}
	return s
}

// Startup is one start-up figure over several runs, in milliseconds.
type Startup struct {
	What   string    `json:"what"`
	Runs   []float64 `json:"runs_ms"`
	Median float64   `json:"median_ms"`
	Max    float64   `json:"max_ms"`
}

func newStartup(what string, runs []float64) Startup {
	s := slices.Clone(runs)
	slices.Sort(s)
	st := Startup{What: what, Runs: runs}
	if len(s) > 0 {
		st.Median, st.Max = s[len(s)/2], s[len(s)-1]
	}
	return st
}

// MemoryRow is one process's resident size (VmRSS; peak is VmHWM) and
// its PSS. Anon and File split the idle RSS (see memory).
type MemoryRow struct {
	Process      string `json:"process"`
	When         string `json:"when,omitempty"`
	IdleKiB      int64  `json:"idle_kib,omitempty"`
	IdleAnonKiB  int64  `json:"idle_anon_kib,omitempty"`
	IdleFileKiB  int64  `json:"idle_file_kib,omitempty"`
	IdlePSSKiB   int64  `json:"idle_pss_kib,omitempty"`
	LoadedKiB    int64  `json:"loaded_kib"`
	LoadedPSSKiB int64  `json:"loaded_pss_kib"`
	PeakKiB      int64  `json:"peak_kib"`
}

// stackProcs are the processes the idle-memory goal counts: the plane and
// the three surfaces (mail-plane up's supervisor is shown, not counted).
var stackProcs = []string{"mail-plane serve", "mail-writer", "mail-inbox", "mail-gateway"}

// supervisorProc is mail-plane up itself in the memory table.
const supervisorProc = "mail-plane up (supervisor)"

// Goal is one of the goals and where it stands.
type Goal struct {
	Goal   string `json:"goal"`
	Figure string `json:"figure"`
	Met    bool   `json:"met"`
}

func newReport(cell time.Duration, mailpitPath string) *Report {
	r := &Report{Started: time.Now().UTC(), Cell: cell.String(),
		Command: "make bench  (go run ./bench -out results/ -cell " + cell.String() + ")"}
	r.Machine = machine(mailpitPath)
	r.busyAtStart, _ = machineBusy()
	return r
}

// machineBusy is the CPU time the whole machine has spent busy (not idle
// or waiting for I/O) since boot, in seconds, from /proc/stat.
func machineBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected %q", line)
	}
	var busy float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		var v float64
		fmt.Sscan(f[i], &v)
		busy += v
	}
	return busy / 100, nil // USER_HZ is 100 on Linux
}

// ownCPU is the CPU time of this process and of every process it started
// and waited for (their children included, once those waited for them).
func ownCPU() float64 {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	sec := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return sec(self.Utime) + sec(self.Stime) + sec(kids.Utime) + sec(kids.Stime)
}

func (r *Report) add(p Pair) {
	p.Mailplane.lat, p.Baseline.lat = nil, nil
	if p.Baseline.Rate > 0 {
		p.Pct = 100 * p.Mailplane.Rate / p.Baseline.Rate
	}
	if p.Peer != nil {
		p.Peer.lat = nil
		if p.Peer.Rate > 0 {
			p.PeerRatio = p.Mailplane.Rate / p.Peer.Rate
		}
	}
	r.Pairs = append(r.Pairs, p)
}

// noteRSS records a process's size at a moment of the run (context for
// the memory figures).
func (r *Report) noteRSS(when string, p *proc) {
	if m, err := memOf(p.pid()); err == nil {
		r.Memory = append(r.Memory, MemoryRow{Process: p.name, When: when, LoadedKiB: m.RSS, LoadedPSSKiB: m.PSS, PeakKiB: m.HWM})
	}
}

func (r *Report) find(section, store, path, size string, conc int) (Pair, bool) {
	for _, p := range r.Pairs {
		if p.Section == section && p.Store == store && p.Path == path && p.Size == size && p.Conc == conc {
			return p, true
		}
	}
	return Pair{}, false
}

// busyWarnPct of the machine's CPU used by other processes during the run
// makes bench.md say that the figures are not a quiet machine's.
const busyWarnPct = 20.0

// ratioGoal is a throughput goal: mailplane's rate on one path at
// concurrency 8, as a share of its baseline's in the same run.
type ratioGoal struct {
	store, path, size string
	pct               float64
}

// ratioGoals are issue #18's throughput goals, each in one place.
var ratioGoals = func() []ratioGoal {
	g := []ratioGoal{
		{"embedded", planeSend, "512 B", 50},
		{"embedded", "POST /emails", "512 B", 25},
		{"embedded", "POST /emails", "100 KiB", 15},
		{"embedded", smtpPath(1), "512 B", 60},
		{"embedded", smtpPath(50), "512 B", 40},
	}
	g = append(g, providerGoals()...) // issue #26
	// The Mailpit store: at least 80% of raw Mailpit on every path.
	for _, size := range sizes {
		for _, path := range []string{"POST /emails", smtpPath(1), smtpPath(50)} {
			g = append(g, ratioGoal{"Mailpit", path, size.Name, 80})
		}
	}
	return g
}()

// peerGoals are issue #37's goals against the peer (raw Mailpit over
// loopback TCP, its own SQLite file), at concurrency 8, 512 B: mailplane's
// rate at least ratio times the peer's in the same figure.
var peerGoals = []struct {
	path  string
	ratio float64
}{
	{smtpPath(1), 2},
	{smtpPath(50), 1.5},
	{"POST /emails", 3},
}

// The other goals, as numbers.
const (
	goalWakeP99    = 10.0 // ms
	goalListP99    = 5.0  // ms, on both stores
	goalUpMs       = 300.0
	goalIdleMB     = 40.0  // plane + 3 surfaces, idle, RSS (see memoryGoal)
	goalPerTrialKB = 100.0 // KB of the whole stack per live trial, at densityMax
	goalOpenP99    = 5.0   // ms, trial.open over the RPC
)

// finish works out where each goal stands.
func (r *Report) finish() {
	r.Seconds = time.Since(r.Started).Seconds()
	if busy, err := machineBusy(); err == nil && r.busyAtStart > 0 && r.Seconds > 0 {
		other := busy - r.busyAtStart - ownCPU()
		r.Machine.OtherCPU = max(0, 100*other/(r.Seconds*float64(r.Machine.Cores)))
	}
	for _, g := range ratioGoals {
		if p, ok := r.find("ingest", g.store, g.path, g.size, 8); ok {
			name := fmt.Sprintf("%s, %s, concurrency 8: ≥ %.0f%% of the %s", g.path, g.size, g.pct, p.Baseline.Label)
			if g.store == "Mailpit" {
				name = fmt.Sprintf("Mailpit store, %s, %s, concurrency 8: ≥ %.0f%% of %s", g.path, g.size, g.pct, p.Baseline.Label)
			}
			r.goal(name, fmt.Sprintf("%.0f%% (%.0f vs %.0f msg/s)", p.Pct, p.Mailplane.Rate, p.Baseline.Rate), p.Pct >= g.pct)
		}
	}
	for _, g := range peerGoals {
		if p, ok := r.find("ingest", "embedded", g.path, "512 B", 8); ok && p.Peer != nil {
			r.goal(fmt.Sprintf("%s, 512 B, concurrency 8: ≥ %.1f× %s", g.path, g.ratio, p.Peer.Label),
				fmt.Sprintf("%.2f× (%.0f vs %.0f msg/s; p99 %.2f vs %.2f ms)", p.PeerRatio, p.Mailplane.Rate, p.Peer.Rate, p.Mailplane.P99, p.Peer.P99),
				p.PeerRatio >= g.ratio)
		}
	}
	for _, store := range []string{"embedded", "Mailpit"} {
		if p, ok := r.find("reads", store, "wait wake-up", "", 1); ok {
			fig := fmt.Sprintf("p99 %.2f ms (p50 %.2f ms) after the ack", p.Mailplane.P99, p.Mailplane.P50)
			if e, ok := r.find("reads", store, "POST to read", "", 1); ok {
				fig += fmt.Sprintf("; POST start to read: p99 %.2f ms", e.Mailplane.P99)
			}
			r.goal(fmt.Sprintf("wait wake-up p99 < %.0f ms (%s store)", goalWakeP99, store), fig, p.Mailplane.P99 < goalWakeP99)
		}
		if p, ok := r.find("reads", store, "list of 32", "", 1); ok {
			r.goal(fmt.Sprintf("list of 32 p99 < %.0f ms (%s store, one reader)", goalListP99, store),
				fmt.Sprintf("p99 %.2f ms (p50 %.2f ms)", p.Mailplane.P99, p.Mailplane.P50), p.Mailplane.P99 < goalListP99)
		}
	}
	if len(r.Startup) > 0 {
		s := r.Startup[0]
		r.goal(fmt.Sprintf("mail-plane up healthy < %.0f ms", goalUpMs),
			fmt.Sprintf("median %.0f ms, max %.0f ms of %d runs", s.Median, s.Max, len(s.Runs)), s.Max < goalUpMs)
	}
	r.memoryGoal()
	if d := r.Density; d != nil {
		r.densityGoals(d)
	}
	r.fairGoal()
	r.preauthGoal()
	r.regressionGoals()
}

// regressionPct is how much worse than the previous run a watched figure
// may get: issue #18's "no figure that meets its goal today may regress by
// more than 10%".
const regressionPct = 10.0

// watchedFigure is a figure that met its goal when issue #18 was filed;
// lower is better.
type watchedFigure struct {
	name, unit string
	value      float64
}

// watched are this run's watched figures: wait wake-up (both stores),
// list of 32 on SQLite, start-up, memory per live trial.
func (r *Report) watched() []watchedFigure {
	var out []watchedFigure
	for _, store := range []string{"embedded", "Mailpit"} {
		if p, ok := r.find("reads", store, "wait wake-up", "", 1); ok {
			out = append(out, watchedFigure{"wait wake-up p99 (" + store + " store)", "ms", p.Mailplane.P99})
		}
	}
	if p, ok := r.find("reads", "embedded", "list of 32", "", 1); ok {
		out = append(out, watchedFigure{"list of 32 p99 (embedded store, one reader)", "ms", p.Mailplane.P99})
	}
	if len(r.Startup) > 0 {
		out = append(out, watchedFigure{"mail-plane up healthy, slowest run", "ms", r.Startup[0].Max})
	}
	if d := r.Density; d != nil && d.PerTrialKiB > 0 {
		out = append(out, watchedFigure{"whole stack per live trial (PSS)", "KB", kb(d.PerTrialKiB)})
	}
	return out
}

// regressionGoals: each watched figure measured in this run and in the
// previous one is at most regressionPct worse.
func (r *Report) regressionGoals() {
	if r.previous == nil {
		return
	}
	for _, f := range r.watched() {
		for _, p := range r.previous.watched() {
			if p.name != f.name || p.value <= 0 {
				continue
			}
			change := 100 * (f.value - p.value) / p.value
			r.goal(fmt.Sprintf("%s: at most %.0f%% worse than the previous run", f.name, regressionPct),
				fmt.Sprintf("%.2f %s (previous run, commit %s: %.2f %s; %+.0f%%)", f.value, f.unit, r.previous.Machine.Commit, p.value, p.unit, change),
				change <= regressionPct)
		}
	}
}

// idleTotals sums the idle rows of stackProcs (n of them found) and
// reads the supervisor's idle PSS.
func (r *Report) idleTotals() (t MemoryRow, n int, supervisorPSS int64) {
	for _, m := range r.Memory {
		switch {
		case m.When != "":
		case slices.Contains(stackProcs, m.Process):
			t.IdleKiB += m.IdleKiB
			t.IdleAnonKiB += m.IdleAnonKiB
			t.IdleFileKiB += m.IdleFileKiB
			t.IdlePSSKiB += m.IdlePSSKiB
			t.LoadedKiB += m.LoadedKiB
			t.LoadedPSSKiB += m.LoadedPSSKiB
			n++
		case m.Process == supervisorProc:
			supervisorPSS = m.IdlePSSKiB
		}
	}
	return t, n, supervisorPSS
}

// memoryGoal is the idle stack's goal. It counts RSS: the plane and the
// three surfaces are four different executables, which share no page with
// one another, so each one's RSS is all it costs, as it would be run alone
// (one unit each). PSS would hand half of the plane's binary pages to
// mail-plane up's supervisor, the same executable, which the goal leaves
// out. PSS is right for the whole tree (supervisor included): it counts
// those shared pages once, where RSS counts them twice; it is reported
// next to the goal.
func (r *Report) memoryGoal() {
	t, n, sup := r.idleTotals()
	if n != len(stackProcs) {
		return
	}
	r.goal(fmt.Sprintf("plane + 3 surfaces idle < %.0f MB resident", goalIdleMB),
		fmt.Sprintf("%.1f MB RSS (%.1f MB anonymous, %.1f MB file-backed); PSS %.1f MB, with mail-plane up's supervisor %.1f MB",
			mb(t.IdleKiB), mb(t.IdleAnonKiB), mb(t.IdleFileKiB), mb(t.IdlePSSKiB), mb(t.IdlePSSKiB+sup)), mb(t.IdleKiB) < goalIdleMB)
}

func (r *Report) goal(goal, figure string, met bool) {
	r.Goals = append(r.Goals, Goal{Goal: goal, Figure: figure, Met: met})
}

// write puts bench.json, bench.md and bench.png into dir.
func (r *Report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	if len(r.Pairs) == 0 {
		return nil // nothing to chart (-only startup, extract or profile)
	}
	f, err := os.Create(filepath.Join(dir, "bench.png"))
	if err != nil {
		return err
	}
	if err := drawChart(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// machine describes this machine from /proc and the toolchain.
func machine(mailpitPath string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb float64
			if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %f kB", &kb); err == nil {
				m.MemoryGiB = kb / (1 << 20)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		m.LoadAvg = strings.Join(f[:min(3, len(f))], " ")
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if mailpitPath != "" {
		// go install leaves Mailpit's own version string "dev"; the
		// module version is in the binary's build information.
		if bi, err := buildinfo.ReadFile(mailpitPath); err == nil {
			m.Mailpit = "Mailpit " + bi.Main.Version
		}
	}
	return m
}

// markdown is bench.md: the goals, then every table.
func (r *Report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Machine
	w("# mailplane benchmark\n\n")
	w("Machine: %s, %d cores, %.0f GiB, %s, %s; commit %s; %s.  \n", m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.Go, m.Commit, m.Mailpit)
	w("Other work on the machine: load average %s at the start; other processes used %.0f%% of its CPU time during the run.  \n", m.LoadAvg, m.OtherCPU)
	if m.Fsync.P50Ms > 0 {
		w("Disk under the run's data: a 12 KiB write made durable (fsync) in p50 %.2f ms, p99 %.2f ms; a durable send is answered after one, so 8 clients that each wait for their answer get at most %.0f sends/s from any plane.  \n",
			m.Fsync.P50Ms, m.Fsync.P99Ms, 8/(m.Fsync.P50Ms/1000))
	}
	w("Command: `%s`, %s, %.0f s.  \n", r.Command, r.Started.Format("2006-01-02 15:04 MST"), r.Seconds)
	w("Each throughput figure: %s per side after a %v warm-up, mailplane and its baseline taking %d turns each, in the same run.\n\n", r.Cell, warmup, rounds)
	if m.OtherCPU > busyWarnPct {
		w("**The machine was busy with other work during this run (%.0f%% of its CPU): the figures understate what mailplane and the baselines do on a quiet machine; their ratios are more robust than the absolute numbers.**\n\n", m.OtherCPU)
	}
	for _, f := range r.Failures {
		w("**Section failed:** %s\n\n", f)
	}
	if len(r.Goals) > 0 {
		w("## Goals\n\n| goal | figure | met |\n|---|---|---|\n")
	}
	for _, g := range r.Goals {
		met := "yes"
		if !g.Met {
			met = "**no**"
		}
		w("| %s | %s | %s |\n", g.Goal, g.Figure, met)
	}
	ingest := func(store, title string) {
		rows := r.section("ingest", store)
		if len(rows) == 0 {
			return
		}
		w("\n## %s\n\n", title)
		w("| path | body | conc | mailplane msg/s | p50 ms | p99 ms | baseline | baseline msg/s | p50 ms | p99 ms | %% of baseline |\n")
		w("|---|---|--:|--:|--:|--:|---|--:|--:|--:|--:|\n")
		for _, p := range rows {
			w("| %s | %s | %d | %.0f | %.2f | %.2f | %s | %.0f | %.2f | %.2f | %.0f%% |\n", p.Path, p.Size, p.Conc,
				p.Mailplane.Rate, p.Mailplane.P50, p.Mailplane.P99, p.Baseline.Label, p.Baseline.Rate, p.Baseline.P50, p.Baseline.P99, p.Pct)
		}
		r.errorLines(w, rows)
	}
	ingest("embedded", "Ingest, embedded store (mail-writer → mail-plane → SQLite, every message durable) vs null servers")
	if len(r.section("ingest", "embedded")) > 0 {
		w("\n\"%s\" is the plane alone, called as mail-writer calls it (one writer grant, the same socket, a 512 B or 100 KiB message, durable before the answer), next to its health RPC (the same socket, grant check and JSON, nothing stored): the ceiling of any door in front of the plane. SMTP 1/conn times the whole connection (connect, greeting, EHLO, one transaction, QUIT); SMTP 50/conn times each transaction.\n", planeSend)
	}
	r.peerMarkdown(w)
	ingest("Mailpit", "Ingest, Mailpit store (mail-writer → mail-plane → Mailpit) vs raw SMTP into the same Mailpit")
	ingest(postgresStore, "Ingest, --store postgres (mail-writer → mail-plane → PostgreSQL, fsync on) vs the embedded store; two planes on the database vs one")

	if rows := r.section("reads", ""); len(rows) > 0 {
		w("\n## Reads through mail-gateway (the evaluator's API)\n\n")
		w("| store | read | conc | mailplane ops/s | p50 ms | p99 ms | baseline | baseline ops/s | p50 ms | p99 ms |\n")
		w("|---|---|--:|--:|--:|--:|---|--:|--:|--:|\n")
		for _, p := range rows {
			w("| %s | %s | %d | %s | %.2f | %.2f | %s | %s | %.2f | %.2f |\n", p.Store, p.Path, p.Conc, rate(p.Mailplane),
				p.Mailplane.P50, p.Mailplane.P99, p.Baseline.Label, rate(p.Baseline), p.Baseline.P50, p.Baseline.P99)
		}
		r.errorLines(w, rows)
		w("\nThe list is of a namespace of 32 messages (full text, codes and links) on a store that also holds %d messages of another trial; Mailpit's list answers 32 summaries of a Mailpit holding %d. Wake-up: a GET …/latest?wait=10s is already waiting when a POST /emails starts; \"wait wake-up\" is from the POST's acknowledgement to the waiting read's answer (negative when the waiter is answered first: the plane wakes waiters on commit), next to a plain GET …/latest sent at the acknowledgement, the best any poller could do; \"POST to read\" is from the start of the POST to the answer, next to POST then GET. %d rounds each.\n", backgroundMessages, backgroundMessages, wakeRounds)
	}
	r.fairMarkdown(w)
	r.preauthMarkdown(w)
	if len(r.Startup) > 0 {
		w("\n## Start-up\n\n| what | median ms | max ms | runs ms |\n|---|--:|--:|---|\n")
		for _, s := range r.Startup {
			runs := make([]string, len(s.Runs))
			for i, x := range s.Runs {
				runs[i] = fmt.Sprintf("%.0f", x)
			}
			w("| %s | %.0f | %.0f | %s |\n", s.What, s.Median, s.Max, strings.Join(runs, ", "))
		}
	}
	var idle, loaded []MemoryRow
	for _, m := range r.Memory {
		if m.When == "" {
			idle = append(idle, m)
		} else {
			loaded = append(loaded, m)
		}
	}
	if len(idle) > 0 {
		w("\n## Memory (VmRSS and PSS)\n\nThe processes of one `mail-plane up`, idle and after %d messages of 512 B (POST /emails, 8 at a time) read back through the gateway and the inbox; Mailpit idle and after the same %d messages by SMTP; a null Go HTTP server (this harness's baseline) idle and after as many POSTs, for what any Go HTTP process costs.\n\n", memoryMessages, memoryMessages)
		w("| process | idle RSS MB | idle: anonymous | idle: file-backed | idle PSS MB | after %d RSS MB | after: PSS MB | peak RSS MB |\n|---|--:|--:|--:|--:|--:|--:|--:|\n", memoryMessages)
		for _, m := range idle {
			w("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", m.Process, mb(m.IdleKiB), mb(m.IdleAnonKiB), mb(m.IdleFileKiB), mb(m.IdlePSSKiB), mb(m.LoadedKiB), mb(m.LoadedPSSKiB), mb(m.PeakKiB))
		}
		if t, n, sup := r.idleTotals(); n == len(stackProcs) {
			w("| **plane + 3 surfaces** | **%.1f** | %.1f | %.1f | %.1f | **%.1f** | %.1f | |\n", mb(t.IdleKiB), mb(t.IdleAnonKiB), mb(t.IdleFileKiB), mb(t.IdlePSSKiB), mb(t.LoadedKiB), mb(t.LoadedPSSKiB))
			w("| whole `mail-plane up` tree (with the supervisor) | | | | %.1f | | | |\n", mb(t.IdlePSSKiB+sup))
		}
		w("\nAnonymous is each process's own memory (heap, stacks, written data); file-backed is pages of its binary mapped into it: nearly all of the binary's code and read-only data, since the kernel maps the pages around each one a process touches. The page cache holds those pages once however many processes map the same file, and may reclaim them under pressure. PSS splits each shared page among the processes that map it: the supervisor and the plane are one executable, so their PSS is lower than their RSS; the surfaces map only their own binaries, so their PSS is their RSS. The goal counts RSS (bench/README.md, \"Idle memory\").\n")
	}
	if len(loaded) > 0 {
		w("\nAfter the ingest runs (each process had taken every ingest figure of its store):\n\n| process | when | RSS MB | PSS MB | peak RSS MB |\n|---|---|--:|--:|--:|\n")
		for _, m := range loaded {
			w("| %s | %s | %.1f | %.1f | %.1f |\n", m.Process, m.When, mb(m.LoadedKiB), mb(m.LoadedPSSKiB), mb(m.PeakKiB))
		}
	}
	if d := r.Density; d != nil {
		r.densityMarkdown(w, d)
	}
	if n := r.Netns; n != nil {
		netnsMarkdown(w, n)
	}
	if f := r.Faults; f != nil {
		faultsMarkdown(w, f)
	}
	if c := r.Console; c != nil {
		consoleMarkdown(w, c)
	}
	for _, n := range r.Notes {
		w("\n%s\n", n)
	}
	if len(r.Pairs) > 0 {
		w("\n![throughput and p99 per path](bench.png)\n")
	}
	return b.String()
}

func (r *Report) section(section, store string) []Pair {
	var out []Pair
	for _, p := range r.Pairs {
		if p.Section == section && (store == "" || p.Store == store) {
			out = append(out, p)
		}
	}
	return out
}

func (r *Report) errorLines(w func(string, ...any), rows []Pair) {
	for _, p := range rows {
		if note := p.errNote(); note != "" {
			w("\n%s %s %s c%d: %s\n", p.Store, p.Path, p.Size, p.Conc, note)
		}
	}
}

func rate(l Load) string {
	if l.Rate == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", l.Rate)
}

// peerMarkdown is the embedded store's ingest figures next to the peer's,
// measured in the same turns.
func (r *Report) peerMarkdown(w func(string, ...any)) {
	var rows []Pair
	for _, p := range r.section("ingest", "embedded") {
		if p.Peer != nil {
			rows = append(rows, p)
		}
	}
	if len(rows) == 0 {
		return
	}
	w("\n## Ingest, embedded store vs raw Mailpit (the peer)\n\n")
	w("| path | body | conc | mailplane msg/s | p99 ms | peer | peer msg/s | p99 ms | ratio |\n|---|---|--:|--:|--:|---|--:|--:|--:|\n")
	for _, p := range rows {
		w("| %s | %s | %d | %.0f | %.2f | %s | %.0f | %.2f | %.2f× |\n", p.Path, p.Size, p.Conc,
			p.Mailplane.Rate, p.Mailplane.P99, p.Peer.Label, p.Peer.Rate, p.Peer.P99, p.PeerRatio)
	}
	w("\nThe peer is a Mailpit of its own (%s), as a user who runs it instead would: SMTP and its HTTP API on loopback TCP, its own SQLite file, no message cap. It takes turns with mailplane and the null server in the same figures as the table above (same clients, same message); mailplane answers each message only once it is durable (fsynced); how durable Mailpit's answer is is Mailpit's own choice, not measured here. The ratio is mailplane's rate over the peer's.\n", r.Machine.Mailpit)
}
