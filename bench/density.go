package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Density (issue 13): many trials on one stack. One `mail-plane up
// --trials 0` (the supervisor, the plane and its three shared surfaces)
// holds 0, then densityMid, then densityMax live trials opened one after
// the other with the admin RPC trial.open; the whole stack's size (PSS,
// summed over every process of the tree) is read at each level. With the
// trials still open, densityEpisodes full episodes run, densityConc at a
// time: open, POST /emails with the candidate's token, the evaluator's
// wait on the gateway wakes, the inbox page shows the message, close. The
// process count and the data directory's disk use are read before and
// after them.
//
// The baseline is the reference in the same run: reference_density.py
// drives the reference sidecar's local_mailbox.py, given with -reference
// or $MAILPLANE_REFERENCE (MailPlane(...).trial()), on
// a Mailpit of this run and reports its own size before and after
// referenceTrials trials, and each open's time.
const (
	densityMid      = 1000
	densityMax      = 10000
	densityEpisodes = 10000
	densityConc     = 4
	// densityWarm episodes run before the first size is read, so that the
	// 0-trial figure is a stack that has served trials, not a cold one.
	densityWarm     = 200
	referenceTrials = 1000
	// episodeWait is the evaluator's wait on the gateway.
	episodeWait = "5s"
	// episodeErrorShare of failed episodes fails the section (a few may
	// meet a connection closed at the surfaces' 30 s lifetime).
	episodeErrorShare = 0.01
)

//go:embed reference_density.py
var referenceDriver []byte

// Density is the section's figures.
type Density struct {
	// Levels are the stack at 0, densityMid and densityMax live trials,
	// then after the episodes (with densityMax still live).
	Levels          []StackLevel `json:"levels"`
	PerTrialKiB     float64      `json:"pss_kib_per_live_trial"`      // 0 → densityMax
	PerTrialMidKi   float64      `json:"pss_kib_per_live_trial_mid"`  // 0 → densityMid
	PerTrialAnonKiB float64      `json:"pss_anon_kib_per_live_trial"` // 0 → densityMax
	Open            Latency      `json:"trial_open"`                  // all densityMax opens
	OpenFirst       Latency      `json:"trial_open_first"`            // the first densityMid
	OpenLater       Latency      `json:"trial_open_later"`            // densityMid → densityMax
	// OpenBlocks are the opens densityMid at a time: whether an open
	// slows down as live trials grow.
	OpenBlocks []Latency `json:"trial_open_by_block"`
	// OpenAtMax and OpenAtZero are opens taking turns on the stack with
	// densityMax live and on a second stack with none (each closed again).
	OpenAtMax     Latency    `json:"trial_open_at_max_in_turns"`
	OpenAtZero    Latency    `json:"trial_open_at_zero_in_turns"`
	Episodes      Load       `json:"episodes"`
	Steps         []StepLoad `json:"episode_steps"`
	DiskBeforeKiB int64      `json:"disk_before_kib"`
	DiskAfterKiB  int64      `json:"disk_after_kib"`
	ProcsBefore   int        `json:"processes_before"`
	ProcsAfter    int        `json:"processes_after"`
	// OpenAfter and MessagesAfter are what the plane's trial list says
	// once the episodes are over: densityMax open, none of their mail.
	OpenAfter     int        `json:"trials_open_after"`
	MessagesAfter int64      `json:"messages_after"`
	Reference     *Reference `json:"reference,omitempty"`
}

// StackLevel is the stack's size with some live trials.
type StackLevel struct {
	When       string    `json:"when"`
	LiveTrials int       `json:"live_trials"`
	PSSKiB     int64     `json:"pss_kib"`
	PSSAnonKiB int64     `json:"pss_anon_kib"`
	RSSKiB     int64     `json:"rss_kib"`
	Processes  int       `json:"processes"`
	Threads    int       `json:"threads"`
	PerProcess []ProcMem `json:"per_process"`
}

// ProcMem is one process of a tree.
type ProcMem struct {
	Process    string `json:"process"`
	PID        int    `json:"pid"`
	PSSKiB     int64  `json:"pss_kib"`
	PSSAnonKiB int64  `json:"pss_anon_kib"`
	RSSKiB     int64  `json:"rss_kib"`
	Threads    int    `json:"threads"`
}

// Latency is a percentile summary of one operation, in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func latencyOf(d []time.Duration) Latency {
	return Latency{N: len(d), P50: ms(percentile(d, 50)), P99: ms(percentile(d, 99)), Max: ms(percentile(d, 100))}
}

// StepLoad is one step of the episodes.
type StepLoad struct {
	Step string `json:"step"`
	Latency
}

// Reference is the reference's figures from reference_density.py.
type Reference struct {
	Python       string  `json:"python"`
	Trials       int     `json:"trials"`
	Threads      int     `json:"live_threads"`
	Before       refSnap `json:"before"`
	After        refSnap `json:"after"`
	PerTrialPSS  float64 `json:"pss_kib_per_live_trial"`
	PerTrialAnon float64 `json:"pss_anon_kib_per_live_trial"`
	PerTrialRSS  float64 `json:"rss_kib_per_live_trial"`
	Open         Latency `json:"trial_open"`
	OpenSeconds  float64 `json:"open_seconds"`
	WarmupOpenMs float64 `json:"warmup_open_ms"`
	openNs       []int64
}

type refSize struct {
	RSS     int64 `json:"rss_kib"`
	PSS     int64 `json:"pss_kib"`
	PSSAnon int64 `json:"pss_anon_kib"`
}

type refSnap struct {
	refSize
	Threads int      `json:"threads"`
	Mailpit *refSize `json:"mailpit,omitempty"`
}

// referenceOutput is reference_density.py's JSON line.
type referenceOutput struct {
	Python      string  `json:"python"`
	Trials      int     `json:"trials"`
	LiveThreads int     `json:"live_threads"`
	WarmupNs    int64   `json:"warmup_open_ns"`
	OpenNs      []int64 `json:"open_ns"`
	ElapsedNs   int64   `json:"open_elapsed_ns"`
	Before      refSnap `json:"before"`
	After       refSnap `json:"after"`
}

// parseReference checks the driver's line and turns it into figures.
func parseReference(line []byte, want int) (*Reference, error) {
	var o referenceOutput
	if err := json.Unmarshal(line, &o); err != nil {
		return nil, fmt.Errorf("reference driver: %w: %.200q", err, line)
	}
	if o.Trials != want || len(o.OpenNs) != want {
		return nil, fmt.Errorf("reference driver: %d trials, %d open times, want %d", o.Trials, len(o.OpenNs), want)
	}
	if o.Before.PSS <= 0 || o.After.PSS <= 0 {
		return nil, fmt.Errorf("reference driver: no sizes (%+v, %+v)", o.Before, o.After)
	}
	lat := make([]time.Duration, len(o.OpenNs))
	for i, n := range o.OpenNs {
		lat[i] = time.Duration(n)
	}
	return &Reference{
		Python: o.Python, Trials: o.Trials, Threads: o.LiveThreads, Before: o.Before, After: o.After,
		PerTrialPSS:  perTrial(o.Before.PSS, o.After.PSS, o.Trials),
		PerTrialRSS:  perTrial(o.Before.RSS, o.After.RSS, o.Trials),
		PerTrialAnon: perTrial(o.Before.PSSAnon, o.After.PSSAnon, o.Trials),
		Open:         latencyOf(lat), OpenSeconds: float64(o.ElapsedNs) / 1e9,
		WarmupOpenMs: float64(o.WarmupNs) / 1e6, openNs: o.OpenNs,
	}, nil
}

// perTrial is the growth per trial in KiB between two sizes.
func perTrial(before, after int64, trials int) float64 {
	if trials <= 0 {
		return 0
	}
	return float64(after-before) / float64(trials)
}

func (h *harness) density(ctx context.Context) error {
	d := &Density{}
	h.report.Density = d
	// The reference first, before any process of mailplane's runs.
	var refErr error
	d.Reference, refErr = h.reference(ctx)
	if refErr != nil {
		h.logf("  reference: %v", refErr)
	} else {
		r := d.Reference
		h.logf("  reference: %d trials: PSS %.1f → %.1f MB, %.1f KiB per trial (RSS %.1f KiB); open p50 %.2f ms p99 %.2f ms",
			r.Trials, mb(r.Before.PSS), mb(r.After.PSS), r.PerTrialPSS, r.PerTrialRSS, r.Open.P50, r.Open.P99)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := h.densityStack(ctx, d); err != nil {
		return err
	}
	if refErr != nil && !errors.Is(refErr, errNoReference) {
		return fmt.Errorf("the reference's baseline: %w", refErr)
	}
	return nil
}

// errNoReference: no reference was given, so its baseline is left out
// of the table rather than failing the run.
var errNoReference = errors.New("not given (-reference or $MAILPLANE_REFERENCE): its baseline is left out")

// reference runs reference_density.py on a fresh Mailpit of this run.
func (h *harness) reference(ctx context.Context) (*Reference, error) {
	if h.referencePath == "" {
		return nil, errNoReference
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, err
	}
	mp, err := h.startMailpit(ctx, "mailpit-reference")
	if err != nil {
		return nil, err
	}
	defer mp.stop()
	script := filepath.Join(h.procs.dir, "reference_density.py")
	if err := os.WriteFile(script, referenceDriver, 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(h.procs.dir, "reference.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, py, script, "--reference", h.referencePath,
		"--mailpit-socket", mp.http, "--mailpit-pid", strconv.Itoa(mp.pid()), "--trials", strconv.Itoa(referenceTrials))
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.Output()
	if err != nil {
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s %s: %v: %.800s", py, filepath.Base(script), err, b)
	}
	r, err := parseReference(bytes.TrimSpace(out), referenceTrials)
	if err != nil {
		return nil, err
	}
	if r.Python == "" {
		if v, err := exec.Command(py, "--version").Output(); err == nil {
			r.Python = strings.TrimSpace(string(v))
		}
	}
	return r, nil
}

// densityStack is mailplane's side: one up stack, its sizes at each level,
// the opens' latencies and the episodes.
func (h *harness) densityStack(ctx context.Context, d *Density) error {
	// The stack runs from private copies of the binaries: PSS splits a
	// file's pages among every process on the machine that maps it, so
	// other runs of bin/ (tests, other stacks) would make its file-backed
	// part shrink and grow with their own lives.
	binDir := filepath.Join(h.procs.dir, "density-bin")
	if err := copyBinaries(h.binDir, binDir); err != nil {
		return err
	}
	dataDir := filepath.Join(h.procs.dir, "density-data")
	up, err := h.startUpFrom(ctx, binDir, "--trials", "0", "--data", dataDir)
	if err != nil {
		return err
	}
	defer up.stop()
	b := up.bundle
	if b.AdminGrantFile == "" || b.PlaneSocket == "" {
		return fmt.Errorf("mail-plane up --json printed no admin_grant_file or plane_socket")
	}
	grant, err := rpc.ReadSecretFile(b.AdminGrantFile)
	if err != nil {
		return err
	}
	newAdmin := func() *rpc.Client { return rpc.NewClient(b.PlaneSocket, grant) }
	admin := newAdmin()
	defer admin.Close()
	root := up.cmd.Process.Pid

	hc := httpClient(2 * densityConc)
	defer hc.CloseIdleConnections()
	ep := &episodes{hc: hc, post: bodyText(512)}
	run := func(n int, mk workerFactory) (Load, error) {
		return countLoad(ctx, n, densityConc, mk)
	}

	// Warm-up, which also proves the episode works before anything counts.
	if l, err := run(densityWarm, ep.workers(newAdmin, nil)); err != nil || float64(l.Errors) > episodeErrorShare*densityWarm {
		return fmt.Errorf("warm-up episodes: %v; %d of %d failed: %s", err, l.Errors, densityWarm, l.FirstErr)
	}
	level := func(when string, live int) (StackLevel, error) {
		time.Sleep(settle)
		s, err := stackSnapshot(root, when, live)
		if err == nil {
			d.Levels = append(d.Levels, s)
			h.logf("  %-38s stack PSS %7.1f MB (RSS %7.1f MB), %d processes, %d threads", when, mb(s.PSSKiB), mb(s.RSSKiB), s.Processes, s.Threads)
		}
		return s, err
	}
	zero, err := level("0 live trials", 0)
	if err != nil {
		return err
	}

	// Open densityMax trials, one after the other, each timed.
	live := make([]rpc.Bundle, 0, densityMax)
	lat := make([]time.Duration, 0, densityMax)
	var firstSecs float64
	openUpTo := func(n int) error {
		t := time.Now()
		for len(live) < n {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			t0 := time.Now()
			bu, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
			if err != nil {
				return fmt.Errorf("trial.open %d: %w", len(live)+1, err)
			}
			lat = append(lat, time.Since(t0))
			live = append(live, bu)
		}
		if firstSecs == 0 {
			firstSecs = time.Since(t).Seconds()
		}
		return nil
	}
	if err := openUpTo(densityMid); err != nil {
		return err
	}
	mid, err := level(thousands(densityMid)+" live trials", densityMid)
	if err != nil {
		return err
	}
	if err := openUpTo(densityMax); err != nil {
		return err
	}
	top, err := level(thousands(densityMax)+" live trials", densityMax)
	if err != nil {
		return err
	}
	d.PerTrialMidKi = perTrial(zero.PSSKiB, mid.PSSKiB, densityMid)
	d.PerTrialKiB = perTrial(zero.PSSKiB, top.PSSKiB, densityMax)
	d.PerTrialAnonKiB = perTrial(zero.PSSAnonKiB, top.PSSAnonKiB, densityMax)
	for i := 0; i < len(lat); i += densityMid {
		d.OpenBlocks = append(d.OpenBlocks, latencyOf(lat[i:min(i+densityMid, len(lat))]))
	}
	d.Open = latencyOf(lat)
	d.OpenFirst = latencyOf(lat[:densityMid])
	d.OpenLater = latencyOf(lat[densityMid:])
	h.logf("  growth per live trial: %.1f KiB (0 → %d), %.1f KiB (0 → %d), anonymous %.1f KiB; trial.open p50 %.2f ms p99 %.2f ms max %.1f ms (first %d: p50 %.2f p99 %.2f)",
		d.PerTrialMidKi, densityMid, d.PerTrialKiB, densityMax, d.PerTrialAnonKiB, d.Open.P50, d.Open.P99, d.Open.Max, densityMid, d.OpenFirst.P50, d.OpenFirst.P99)
	ports := map[int]bool{}
	for _, bu := range live {
		if bu.SMTPPort == 0 || ports[bu.SMTPPort] {
			return fmt.Errorf("trial %s has SMTP port %d, not one of its own", bu.Namespace, bu.SMTPPort)
		}
		ports[bu.SMTPPort] = true
	}

	// The trial.open row of the chart: the first densityMid opens next to
	// the reference's referenceTrials (the same count, one after the other).
	if r := d.Reference; r != nil {
		mine := Load{Label: "mailplane trial.open (RPC)", lat: lat[:densityMid], Seconds: firstSecs}
		mine.finish()
		ref := Load{Label: "reference MailPlane.trial()", Seconds: r.OpenSeconds}
		for _, n := range r.openNs {
			ref.add(time.Duration(n))
		}
		ref.finish()
		h.addDensity(Pair{Section: "density", Store: "embedded", Path: fmt.Sprintf("trial open, 0 to %s live", thousands(densityMid)), Conc: 1, Mailplane: mine, Baseline: ref})
	}

	// Does an open slow down with densityMax live, or with the machine?
	// densityMid opens on this stack, each next to one on a second stack
	// with none live, taking turns so that both meet the same machine;
	// each trial is closed again at once (untimed), so that the counts
	// stay where they are.
	if err := h.openBeside(ctx, d, admin, filepath.Join(h.procs.dir, "density-data-2")); err != nil {
		return err
	}

	// densityEpisodes episodes with densityMax trials live.
	if d.DiskBeforeKiB, err = diskUsage(dataDir); err != nil {
		return err
	}
	d.ProcsBefore = top.Processes
	// In two halves, the stack's size read between them: whether what
	// the episodes leave behind grows with their number.
	steps := &stepTimes{}
	half, err := run(densityEpisodes/2, ep.workers(newAdmin, steps))
	if err != nil {
		return err
	}
	if _, err := level(fmt.Sprintf("%s live, after %s episodes", thousands(densityMax), thousands(densityEpisodes/2)), densityMax); err != nil {
		return err
	}
	rest, err := run(densityEpisodes-densityEpisodes/2, ep.workers(newAdmin, steps))
	if err != nil {
		return err
	}
	d.Episodes = mergeLoads("open, POST, wait, inbox, close", half, rest)
	d.Steps = steps.summary()
	h.logf("  %d episodes, %d at a time: %.0f/s, p50 %.2f ms, p99 %.2f ms, %d failed %s",
		densityEpisodes, densityConc, d.Episodes.Rate, d.Episodes.P50, d.Episodes.P99, d.Episodes.Errors, d.Episodes.FirstErr)
	after, err := level(fmt.Sprintf("%s live, after %s episodes", thousands(densityMax), thousands(densityEpisodes)), densityMax)
	if err != nil {
		return err
	}
	d.ProcsAfter = after.Processes
	if d.DiskAfterKiB, err = diskUsage(dataDir); err != nil {
		return err
	}
	infos, err := admin.AllTrials(ctx)
	if err != nil {
		return err
	}
	d.OpenAfter = len(infos)
	for _, t := range infos {
		d.MessagesAfter += t.Messages
	}
	h.logf("  processes %d → %d; data directory %.1f MB → %.1f MB; %d trials open, %d messages",
		d.ProcsBefore, d.ProcsAfter, mb(d.DiskBeforeKiB), mb(d.DiskAfterKiB), d.OpenAfter, d.MessagesAfter)
	if float64(d.Episodes.Errors) > episodeErrorShare*densityEpisodes {
		return fmt.Errorf("%d of %d episodes failed: %s", d.Episodes.Errors, densityEpisodes, d.Episodes.FirstErr)
	}
	if d.OpenAfter != densityMax {
		return fmt.Errorf("after the episodes the plane lists %d open trials, want %d", d.OpenAfter, densityMax)
	}

	// The episodes' row of the chart: full episodes next to the same
	// round (POST, wait, inbox) on trials opened ahead (the live ones,
	// each used once), so that the difference is the open and the close.
	next := 0
	var mu sync.Mutex
	take := func() rpc.Bundle {
		mu.Lock()
		defer mu.Unlock()
		bu := live[next%len(live)]
		next++
		return bu
	}
	kept := func(int) (worker, error) {
		return worker{do: func() (time.Duration, error) {
			bu := take()
			return timed(func() error { return ep.round(bu, "kept "+bu.Namespace) })
		}}, nil
	}
	s, base, err := pair(ctx, h.cell, densityConc, "mailplane episode", ep.workers(newAdmin, nil), "the same without open and close", kept)
	if err != nil {
		return err
	}
	h.addDensity(Pair{Section: "density", Store: "embedded", Path: "episode, open to close", Conc: densityConc, Mailplane: s, Baseline: base})
	return nil
}

// copyBinaries copies the binaries from src into a new dst.
func copyBinaries(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, name := range binaries {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// openBeside times densityMid opens on the stack of admin (densityMax
// live) and as many on a second stack with none live, in turns.
func (h *harness) openBeside(ctx context.Context, d *Density, admin *rpc.Client, dataDir string) error {
	up2, err := h.startUp(ctx, "--trials", "0", "--data", dataDir)
	if err != nil {
		return err
	}
	defer up2.stop()
	grant, err := rpc.ReadSecretFile(up2.bundle.AdminGrantFile)
	if err != nil {
		return err
	}
	admin2 := rpc.NewClient(up2.bundle.PlaneSocket, grant)
	defer admin2.Close()
	full := Load{Label: fmt.Sprintf("trial.open, %s live", thousands(densityMax))}
	empty := Load{Label: "the same, a second stack with 0 live"}
	type side struct {
		c *rpc.Client
		l *Load
	}
	a, b := side{admin, &full}, side{admin2, &empty}
	for i := range densityMid {
		turn := []side{a, b}
		if i%2 == 1 { // each goes first half of the time
			turn = []side{b, a}
		}
		for _, s := range turn {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			t0 := time.Now()
			bu, err := s.c.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
			took := time.Since(t0)
			if err != nil {
				return fmt.Errorf("trial.open (%s): %w", s.l.Label, err)
			}
			s.l.add(took)
			s.l.Seconds += took.Seconds()
			if err := s.c.TrialClose(ctx, bu.Namespace); err != nil {
				return fmt.Errorf("trial.close (%s): %w", s.l.Label, err)
			}
		}
	}
	full.finish()
	empty.finish()
	d.OpenAtMax, d.OpenAtZero = latencyOf(full.lat), latencyOf(empty.lat)
	h.addDensity(Pair{Section: "density", Store: "embedded", Path: fmt.Sprintf("trial open, %s live vs 0", thousands(densityMax)), Conc: 1, Mailplane: full, Baseline: empty})
	return nil
}

// episodes drives full episodes on a stack.
type episodes struct {
	hc   *http.Client
	post string // the message's text
}

// workers makes episode workers, each with its own admin client; when
// steps is not nil, each step's time is kept there.
func (e *episodes) workers(newAdmin func() *rpc.Client, steps *stepTimes) workerFactory {
	return func(int) (worker, error) {
		admin := newAdmin()
		return worker{do: func() (time.Duration, error) {
			return e.episode(admin, steps)
		}, close: admin.Close}, nil
	}
}

// episode is one trial's life: open, POST /emails with the candidate's
// token while the evaluator waits on the gateway, the inbox page, close.
// A failed step still closes the trial.
func (e *episodes) episode(admin *rpc.Client, steps *stepTimes) (time.Duration, error) {
	ctx := context.Background()
	t0 := time.Now()
	b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		return 0, fmt.Errorf("trial.open: %w", err)
	}
	t1 := time.Now()
	roundErr := e.round(b, "episode "+b.Namespace)
	t2 := time.Now()
	if err := admin.TrialClose(ctx, b.Namespace); err != nil {
		return 0, fmt.Errorf("trial.close: %w", err)
	}
	t3 := time.Now()
	if roundErr != nil {
		return 0, roundErr
	}
	steps.add(t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
	return t3.Sub(t0), nil
}

// round is an episode without its open and close: the evaluator waits on
// the gateway, the candidate POSTs, the wait wakes with the message, the
// agent's inbox page shows it.
func (e *episodes) round(b rpc.Bundle, subject string) error {
	waited := make(chan error, 1)
	go func() { waited <- e.waitFor(b, subject) }()
	env := b.CandidateEnvironment
	body, _ := json.Marshal(map[string]string{"from": env["WEBSITEBENCH_MAIL_FROM"], "to": recipient, "subject": subject, "text": e.post})
	req, _ := http.NewRequest(http.MethodPost, env["WEBSITEBENCH_MAIL_API_URL"], bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+env["WEBSITEBENCH_MAIL_API_TOKEN"])
	if err := do(e.hc, req, http.StatusOK); err != nil {
		return err // the waiter ends on its own (its channel is buffered)
	}
	if err := <-waited; err != nil {
		return err
	}
	page, err := e.get(b.InboxURL, "")
	if err != nil {
		return fmt.Errorf("inbox page: %w", err)
	}
	if !bytes.Contains(page, []byte(subject)) {
		return fmt.Errorf("inbox page of %s does not show %q", b.Namespace, subject)
	}
	return nil
}

// waitFor is the evaluator's waiting list read; it fails unless the
// answer holds subject.
func (e *episodes) waitFor(b rpc.Bundle, subject string) error {
	body, err := e.get(b.APIURL+"/api/namespaces/"+b.Namespace+"/messages?wait="+episodeWait, b.ReadCapability)
	if err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	var list struct {
		Messages []struct {
			Subject string `json:"subject"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	for _, m := range list.Messages {
		if m.Subject == subject {
			return nil
		}
	}
	return fmt.Errorf("wait on %s woke with %d messages, not %q", b.Namespace, len(list.Messages), subject)
}

func (e *episodes) get(url, bearer string) ([]byte, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %.200s", req.URL.Path, resp.StatusCode, body)
	}
	return body, nil
}

// stepTimes keeps each step of the measured episodes.
type stepTimes struct {
	mu                 sync.Mutex
	open, round, close []time.Duration
}

func (s *stepTimes) add(open, round, close time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.open = append(s.open, open)
	s.round = append(s.round, round)
	s.close = append(s.close, close)
	s.mu.Unlock()
}

func (s *stepTimes) summary() []StepLoad {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []StepLoad{
		{"trial.open", latencyOf(s.open)},
		{"POST /emails, wait wakes, inbox page shows it", latencyOf(s.round)},
		{"trial.close", latencyOf(s.close)},
	}
}

// mergeLoads is one Load of several runs: every latency, the time spent
// running (not between runs), every error.
func mergeLoads(label string, ls ...Load) Load {
	m := Load{Label: label}
	for _, l := range ls {
		m.lat = append(m.lat, l.lat...)
		m.Seconds += l.Seconds
		m.Errors += l.Errors
		if m.FirstErr == "" {
			m.FirstErr = l.FirstErr
		}
	}
	m.finish()
	return m
}

// countLoad runs exactly n operations on conc workers and measures them
// as one Load: the rate is n over the wall time. Unlike count, a failed
// operation is counted and the run goes on (errorPause after it).
func countLoad(ctx context.Context, n, conc int, mk workerFactory) (Load, error) {
	s, err := newSide("", conc, mk)
	if err != nil {
		return Load{}, err
	}
	defer s.close()
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	lats := make([][]time.Duration, conc)
	errs := make([]int, conc)
	first := make([]error, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for i, w := range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if ctx.Err() != nil {
					return
				}
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
	l := Load{Seconds: time.Since(start).Seconds()}
	for i := range conc {
		l.lat = append(l.lat, lats[i]...)
		l.Errors += errs[i]
		if first[i] != nil && l.FirstErr == "" {
			l.FirstErr = first[i].Error()
		}
	}
	l.finish()
	return l, ctx.Err()
}

func (h *harness) addDensity(p Pair) {
	h.report.add(p)
	h.logf("  %-40s c%d  mailplane %7.0f/s p50 %5.2fms p99 %5.2fms  %s %7.0f/s p50 %5.2fms p99 %5.2fms  %s",
		p.Path, p.Conc, p.Mailplane.Rate, p.Mailplane.P50, p.Mailplane.P99, p.Baseline.Label, p.Baseline.Rate, p.Baseline.P50, p.Baseline.P99, p.errNote())
}
