package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profileLoad is how long the profile section drives its load, after a
// warm-up.
const profileLoad = 10 * time.Second

// profileNodes is how many functions each pprof -top text lists.
const profileNodes = 40

// profileLoads are the loads the profile section drives, each on a
// plane and a writer of its own, so that each profile holds one load:
// POST /emails (the POST goal; its files keep the plain names)
// and SMTP at 1 and at 50 messages a connection (its SMTP goals), all
// 512 B from 8 clients.
var profileLoads = []struct {
	name, suffix string
	perConn      int // SMTP messages a connection; 0: POST /emails
}{
	{"POST /emails", "", 0},
	{smtpPath(1), "-smtp1", 1},
	{smtpPath(50), "-smtp50", 50},
}

// profile takes CPU profiles of mail-plane serve and mail-writer under
// each of profileLoads and writes, into the output directory, each
// profile (plane.cpu.pprof and writer.cpu.pprof for POST /emails,
// plane-smtp1.cpu.pprof and so on for SMTP) and its `go tool pprof -top`
// text (plane.top.txt, writer.top.txt, …). The binaries must be make
// profile's (the profile build tag: the hidden --cpu-profile flag, see
// internal/cliapp/profile.go). It is not part of a default run: -only
// profile names it.
func (h *harness) profile(ctx context.Context) error {
	if h.out == "" {
		return fmt.Errorf("no output directory")
	}
	if err := os.MkdirAll(h.out, 0o755); err != nil {
		return err
	}
	h.costs = nil
	for _, l := range profileLoads {
		if err := h.profileOne(ctx, l.name, l.suffix, l.perConn); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
	}
	if err := h.peerCosts(ctx); err != nil {
		return err
	}
	h.noteCosts()
	return nil
}

// cpuPerMessage warms s up, drives it for d, and returns the CPU time
// (utime+stime of /proc/PID/stat) each of pids spent per message of the
// load, in µs: a cost that does not move with the machine's other work
// as a rate does.
func cpuPerMessage(ctx context.Context, s *side, d time.Duration, pids ...int) ([]float64, error) {
	s.run(ctx, warmup, false)
	before := make([]time.Duration, len(pids))
	for i, pid := range pids {
		var err error
		if before[i], err = cpuTime(pid); err != nil {
			return nil, err
		}
	}
	s.run(ctx, d, true)
	per := make([]float64, len(pids))
	for i, pid := range pids {
		after, err := cpuTime(pid)
		if err != nil {
			return nil, err
		}
		if n := len(s.load.lat); n > 0 {
			per[i] = float64((after - before[i]).Microseconds()) / float64(n)
		}
	}
	return per, nil
}

// cost is what one server and this harness's load generator spent per
// message of one load.
type cost struct {
	load, server    string
	rate            float64
	serverUS, genUS float64
}

// peerCosts drives each of profileLoads, unprofiled, at raw Mailpit (its
// SMTP, and its POST /api/v1/send for POST /emails) and at the null
// server of its protocol, each for profileCostLoad, and keeps their CPU
// per message beside mailplane's: what bounds a rate on this machine's
// cores is the sum of what the server and the load generator spend on a
// message.
func (h *harness) peerCosts(ctx context.Context) error {
	peer, err := h.startPeer(ctx, "mailpit-cost")
	if err != nil {
		return err
	}
	defer peer.stop()
	nh, err := h.startNull(ctx, "http")
	if err != nil {
		return err
	}
	defer nh.stop()
	ns, err := h.startNull(ctx, "smtp")
	if err != nil {
		return err
	}
	defer ns.stop()
	const conc = 8
	for _, l := range profileLoads {
		type target struct {
			server string
			pid    int
			mk     workerFactory
			close  func()
		}
		var targets []target
		if l.perConn == 0 {
			mp, closeP := postWorkers("http://"+peer.httpAddr+"/api/v1/send", "", mailpitSendJSON(512), conc)
			nl, closeN := postWorkers("http://"+nh.addr+"/emails", "", emailJSON(512), conc)
			targets = []target{{"raw Mailpit, POST /api/v1/send", peer.pid(), mp, closeP}, {"null HTTP handler", nh.pid(), nl, closeN}}
		} else {
			data := rfc5322(512)
			targets = []target{
				{"raw Mailpit, " + smtpPath(l.perConn), peer.pid(), smtpWorkers(tcpDialer(peer.smtpAddr), data, l.perConn), func() {}},
				{"null go-smtp server", ns.pid(), smtpWorkers(tcpDialer(ns.addr), data, l.perConn), func() {}},
			}
		}
		for _, t := range targets {
			s, err := newSide(t.server, conc, t.mk)
			if err != nil {
				t.close()
				return err
			}
			per, err := cpuPerMessage(ctx, s, profileCostLoad, t.pid, os.Getpid())
			s.close()
			t.close()
			s.load.finish()
			if err != nil {
				return err
			}
			h.costs = append(h.costs, cost{l.name, t.server, s.load.Rate, per[0], per[1]})
			h.logf("  %s 512 B c%d at %s: %.0f msg/s; CPU per message: server %.0f µs, load generator %.0f µs", l.name, conc, t.server, s.load.Rate, per[0], per[1])
		}
	}
	return nil
}

// profileCostLoad is how long peerCosts drives each of its loads.
const profileCostLoad = 3 * time.Second

// noteCosts adds the costs table to the report's notes.
func (h *harness) noteCosts() {
	var b strings.Builder
	b.WriteString("CPU per message (µs, utime+stime of /proc/PID/stat over the load; mailplane's under profile), 512 B, 8 clients. " +
		"On this machine's cores, a load's rate is bounded by cores ÷ (server + load generator), less what waits (fsync, scheduling):\n\n" +
		"| load | server | msg/s | server µs | load generator µs | bound at 2 cores, msg/s |\n|---|---|--:|--:|--:|--:|\n")
	for _, c := range h.costs {
		bound := 0.0
		if t := c.serverUS + c.genUS; t > 0 {
			bound = 2e6 / t
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.0f |\n", c.load, c.server, c.rate, c.serverUS, c.genUS, bound)
	}
	h.report.Notes = append(h.report.Notes, b.String())
}

// profileOne profiles one load: a plane and a writer started for it,
// 200 ms of warm-up, then profileLoad of the load, both stopped.
func (h *harness) profileOne(ctx context.Context, load, suffix string, perConn int) error {
	// By the names startPlane and startSurface are given.
	profiles := map[string]string{
		"plane":       filepath.Join(h.out, "plane"+suffix+".cpu.pprof"),
		"mail-writer": filepath.Join(h.out, "writer"+suffix+".cpu.pprof"),
	}
	for _, p := range profiles {
		os.Remove(p) // a file left by an earlier run must not pass for this one's
	}
	h.cpuProfile = func(name string) []string {
		if p, ok := profiles[name]; ok {
			return []string{"--cpu-profile", p}
		}
		return nil
	}
	defer func() { h.cpuProfile = nil }()
	pl, err := h.startPlane(ctx, "plane")
	if err != nil {
		return fmt.Errorf("%w (are the binaries make profile's?)", err)
	}
	w, id, err := h.trialWriter(ctx, pl)
	if err != nil {
		return err
	}
	const conc = 8
	mk, closeLoad := smtpWorkers(tcpDialer(w.smtpAddr), rfc5322(512), perConn), func() {}
	if perConn == 0 {
		mk, closeLoad = postWorkers(w.url+"/emails", id.MailAPIToken, emailJSON(512), conc)
	}
	s, err := newSide(load, conc, mk)
	if err != nil {
		closeLoad()
		return err
	}
	perSend, err := cpuPerMessage(ctx, s, profileLoad, pl.proc.pid(), w.proc.pid(), os.Getpid())
	if err != nil {
		s.close()
		closeLoad()
		return err
	}
	s.close()
	closeLoad()
	s.load.finish()
	h.costs = append(h.costs, cost{load, "mailplane (mail-plane serve + mail-writer)", s.load.Rate, perSend[0] + perSend[1], perSend[2]})
	// SIGTERM: each process writes its profile as its command returns.
	w.stop()
	pl.stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var tops []string
	for _, name := range []string{"plane", "mail-writer"} {
		top, err := pprofTop(profiles[name])
		if err != nil {
			return fmt.Errorf("%s's profile: %w", name, err)
		}
		txt := strings.TrimSuffix(profiles[name], ".cpu.pprof") + ".top.txt"
		if err := os.WriteFile(txt, top, 0o644); err != nil {
			return err
		}
		tops = append(tops, filepath.Base(txt))
	}
	h.report.Notes = append(h.report.Notes, fmt.Sprintf("Profiles: CPU profiles of mail-plane serve and mail-writer (%s, %s) "+
		"over their whole run: start, %v of warm-up, then %v of %s, 512 B, %d clients: %.0f msg/s, p50 %.2f ms, p99 %.2f ms, %d errors; "+
		"`go tool pprof -top` of each in %s. CPU per message during the %v (utime+stime of /proc/PID/stat, profiling included): "+
		"mail-plane serve %.0f µs, mail-writer %.0f µs, this harness's load generator %.0f µs. bench/README.md, \"Profiles\", explains the top entries.",
		filepath.Base(profiles["plane"]), filepath.Base(profiles["mail-writer"]), warmup, profileLoad, load, conc,
		s.load.Rate, s.load.P50, s.load.P99, s.load.Errors, strings.Join(tops, " and "), profileLoad, perSend[0], perSend[1], perSend[2]))
	h.logf("  %s 512 B c%d under profile: %.0f msg/s; CPU per message: plane %.0f µs, writer %.0f µs; %s",
		load, conc, s.load.Rate, perSend[0], perSend[1], strings.Join(tops, ", "))
	return nil
}

// pprofTop is `go tool pprof -top` of a CPU profile, twice: its
// profileNodes heaviest functions by their own time (flat), then by the
// time spent in them and what they call (-cum), which shows the paths.
// The profile names its functions itself, so no binary is needed (make
// build strips its symbols).
func pprofTop(path string) ([]byte, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if st.Size() == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	var all []byte
	for _, sort := range []string{"-flat", "-cum"} {
		cmd := exec.Command("go", "tool", "pprof", "-top", sort, fmt.Sprintf("-nodecount=%d", profileNodes), path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go tool pprof %s: %v\n%s", sort, err, stderr.String())
		}
		all = append(append(all, fmt.Sprintf("# go tool pprof -top %s -nodecount=%d %s\n", sort, profileNodes, filepath.Base(path))...), out...)
		all = append(all, '\n')
	}
	return all, nil
}
