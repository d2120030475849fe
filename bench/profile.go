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
	for _, l := range profileLoads {
		if err := h.profileOne(ctx, l.name, l.suffix, l.perConn); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
	}
	return nil
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
	s.run(ctx, warmup, false)
	// The CPU each process spends on the load, per message: the figure
	// the send path's cost is measured by (it does not move with the
	// machine's other work as a rate does).
	procsCPU := []*proc{pl.proc, w.proc}
	before := make([]time.Duration, len(procsCPU))
	for i, p := range procsCPU {
		if before[i], err = cpuTime(p.pid()); err != nil {
			return err
		}
	}
	s.run(ctx, profileLoad, true)
	perSend := make([]float64, len(procsCPU))
	for i, p := range procsCPU {
		after, err := cpuTime(p.pid())
		if err != nil {
			return err
		}
		if n := len(s.load.lat); n > 0 {
			perSend[i] = float64((after - before[i]).Microseconds()) / float64(n)
		}
	}
	s.close()
	closeLoad()
	s.load.finish()
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
		"mail-plane serve %.0f µs, mail-writer %.0f µs. bench/README.md, \"Profiles\", explains the top entries.",
		filepath.Base(profiles["plane"]), filepath.Base(profiles["mail-writer"]), warmup, profileLoad, load, conc,
		s.load.Rate, s.load.P50, s.load.P99, s.load.Errors, strings.Join(tops, " and "), profileLoad, perSend[0], perSend[1]))
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
