package main

import (
	"context"
	"fmt"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Density: one plane holding densityTrials live trials. One writer per
// trial would be densityTrials processes on a 2-core machine, so the
// plane's side is driven the way those writers would drive it: one RPC
// client per trial, presenting that trial's writer grant over its own
// connection to the plane's socket. The surfaces' side is a handful of
// real writers and inboxes (densitySurfaces of each).
const (
	densityTrials   = 200
	densitySurfaces = 4
	densityConc     = 8
	// densityWarm messages fill the plane's caches and heap to a steady
	// state before the first size is read; densityTraffic are sent before
	// each of the two sizes are read.
	densityWarm    = 4000
	densityTraffic = 2000
)

func (h *harness) density(ctx context.Context) error {
	pl, err := h.startPlane(ctx, "plane-density")
	if err != nil {
		return err
	}
	raw := crlf(string(rfc5322(512)))
	ids := make([]rpc.Identity, 0, densityTrials)
	clients := make([]*rpc.Client, 0, densityTrials)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	addTrial := func() error {
		id, err := pl.trial(ctx)
		if err != nil {
			return err
		}
		ids = append(ids, id)
		clients = append(clients, rpc.NewClient(pl.socket, id.WriterGrant))
		return nil
	}
	if err := addTrial(); err != nil {
		return err
	}
	one := rpcSendWorkers(clients[:1], raw)
	if err := count(ctx, densityWarm, densityConc, one); err != nil {
		return err
	}
	if err := count(ctx, densityTraffic, densityConc, one); err != nil {
		return err
	}
	time.Sleep(settle)
	before, err := rssOf(pl.pid())
	if err != nil {
		return err
	}

	t := time.Now()
	for len(ids) < densityTrials {
		if err := addTrial(); err != nil {
			return fmt.Errorf("trial %d: %w", len(ids)+1, err)
		}
	}
	createMs := ms(time.Since(t)) / float64(densityTrials-1)
	many := spreadWorkers(clients, raw, densityConc)
	if err := count(ctx, densityTraffic, densityConc, many); err != nil {
		return err
	}
	// Every namespace read back once by the evaluator's door, and its
	// count checked against what was sent.
	if err := readAll(ctx, pl, ids); err != nil {
		return err
	}
	time.Sleep(settle)
	after, err := rssOf(pl.pid())
	if err != nil {
		return err
	}
	d := &Density{
		Trials: densityTrials, CreateMs: createMs,
		PlaneOneKiB: before.RSS, PlaneManyKiB: after.RSS,
		PerTrialKiB: float64(after.RSS-before.RSS) / float64(densityTrials-1),
	}
	h.report.Density = d
	h.logf("  plane RSS: 1 trial %.1f MB, %d trials %.1f MB: %.1f KiB per extra trial; trial.create %.2f ms each",
		mb(before.RSS), densityTrials, mb(after.RSS), d.PerTrialKiB, createMs)

	// Throughput and p99 with every trial live, next to one trial alone.
	s, b, err := pair(ctx, h.cell, densityConc, "mailplane", many, "1 trial", one)
	if err != nil {
		return err
	}
	h.addDensity(Pair{Section: "density", Store: "embedded", Path: fmt.Sprintf("RPC send, %d trials", densityTrials), Size: "512 B", Conc: densityConc, Mailplane: s, Baseline: b})

	// Surfaces: a handful of real writers and inboxes on trials 1…n.
	var writers []*surface
	for i := 1; i <= densitySurfaces; i++ {
		w, err := h.startSurface(ctx, "mail-writer", pl, ids[i].WriterGrant, "")
		if err != nil {
			return err
		}
		writers = append(writers, w)
		in, err := h.startSurface(ctx, "mail-inbox", pl, ids[i].InboxGrant, ids[i].InboxToken)
		if err != nil {
			return err
		}
		d.Surfaces = append(d.Surfaces, surfaceMem{name: fmt.Sprintf("mail-inbox (trial %d)", i), p: in.proc, url: in.url + "/inbox/" + ids[i].InboxToken})
	}
	post := emailJSON(512)
	across := func(i int) (worker, error) {
		w := writers[i%len(writers)]
		mk, closeW := postWorkers(w.url+"/emails", ids[i%len(writers)+1].MailAPIToken, post, 2)
		wk, err := mk(i)
		wk.close = closeW
		return wk, err
	}
	single, closeSingle := postWorkers(writers[0].url+"/emails", ids[1].MailAPIToken, post, densityConc)
	defer closeSingle()
	s, b, err = pair(ctx, h.cell, densityConc, "mailplane", across, "1 writer", single)
	if err != nil {
		return err
	}
	h.addDensity(Pair{Section: "density", Store: "embedded", Path: fmt.Sprintf("POST /emails, %d writers", densitySurfaces), Size: "512 B", Conc: densityConc, Mailplane: s, Baseline: b})
	for i, w := range writers {
		d.Surfaces = append(d.Surfaces, surfaceMem{name: fmt.Sprintf("mail-writer (trial %d)", i+1), p: w.proc})
	}
	for _, sm := range d.Surfaces {
		if sm.url != "" && !healthy(sm.url) {
			return fmt.Errorf("%s: its page did not answer 200", sm.name)
		}
	}
	time.Sleep(settle)
	for _, sm := range d.Surfaces {
		m, err := rssOf(sm.p.pid())
		if err != nil {
			return err
		}
		d.SurfaceRSS = append(d.SurfaceRSS, MemoryRow{Process: sm.name, LoadedKiB: m.RSS, PeakKiB: m.HWM})
		h.logf("  %-24s %.1f MB (peak %.1f MB)", sm.name, mb(m.RSS), mb(m.HWM))
	}
	return nil
}

// surfaceMem is a surface whose size the density figures report.
type surfaceMem struct {
	name string
	p    *proc
	url  string // a page to load before reading its size (the inbox's)
}

// spreadWorkers give worker i the trials i, i+conc, i+2·conc, … and send
// to them in turn, so that each trial's client (and its one connection)
// is used by one worker only, as one writer process per trial would.
func spreadWorkers(clients []*rpc.Client, raw []byte, conc int) workerFactory {
	return func(i int) (worker, error) {
		var mine []*rpc.Client
		for j := i; j < len(clients); j += conc {
			mine = append(mine, clients[j])
		}
		next := 0
		return worker{do: func() (time.Duration, error) {
			c := mine[next%len(mine)]
			next++
			return timed(func() error { return sendRPC(context.Background(), c, raw) })
		}}, nil
	}
}

// listPage is the most messages one list answers (the plane's
// maxListMessages); a namespace with more is checked for a full page.
const listPage = 512

// readAll lists every trial's namespace through the plane with the
// gateway's grant and its read capability, and checks the plane's count of
// each against what the list answered.
func readAll(ctx context.Context, pl *plane, ids []rpc.Identity) error {
	g, err := rpc.ReadSecretFile(pl.data + "/gateway.grant")
	if err != nil {
		return err
	}
	gc := rpc.NewClient(pl.socket, g)
	defer gc.Close()
	infos, err := pl.admin.AllTrials(ctx)
	if err != nil {
		return err
	}
	counts := map[string]int64{}
	for _, t := range infos {
		counts[t.Namespace] = t.Messages
	}
	for _, id := range ids {
		msgs, err := gc.List(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability})
		if err != nil {
			return fmt.Errorf("list %s: %w", id.Namespace, err)
		}
		want := min(counts[id.Namespace], listPage)
		if int64(len(msgs)) != want || want == 0 {
			return fmt.Errorf("namespace %s: list answered %d messages, the plane counts %d", id.Namespace, len(msgs), counts[id.Namespace])
		}
	}
	return nil
}

func (h *harness) addDensity(p Pair) {
	h.report.add(p)
	h.logf("  %-24s c%d  mailplane %7.0f/s p99 %5.2fms  %s %7.0f/s p99 %5.2fms  %s",
		p.Path, p.Conc, p.Mailplane.Rate, p.Mailplane.P99, p.Baseline.Label, p.Baseline.Rate, p.Baseline.P99, p.errNote())
}
