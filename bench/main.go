// Command bench is `make bench`: it measures mailplane on this machine,
// each figure next to a baseline measured in the same run, and writes
// results/bench.md (the table), results/bench.png (the chart) and
// results/bench.json (every figure).
//
//	go run ./bench -out results/
//
// It runs the real binaries (bin/, built by make build) and a real Mailpit
// as separate processes, talks to them over real sockets only, and stops
// every process it started before it exits, also when interrupted.
//
// Sections: ingest (POST /emails and SMTP into the embedded store next to
// null servers, and into the Mailpit store next to raw Mailpit), reads
// (list of 32, latest, wait wake-up), start-up (mail-plane up), memory
// (RSS and PSS idle and after 10,000 messages), density (one plane,
// 10,000 live trials) and extract (codes and links of a 100 KiB HTML
// message, in process); and, only when -only names it (make profile),
// profile (CPU profiles of the plane and the writer under POST /emails).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// harness holds what every section needs.
type harness struct {
	binDir      string
	mailpitPath string
	// referencePath is the reference's local_mailbox.py, the density
	// section's baseline ("" when not found).
	referencePath string
	cell          time.Duration // measured time per side of one figure
	procs         *procs
	report        *Report
	logf          func(format string, args ...any)
	out           string // the output directory
	// cpuProfile, set by the profile section, gives the --cpu-profile
	// flag for the process of that name (nil: none).
	cpuProfile func(name string) []string
	// costs are the profile section's CPU per message of each server
	// and of the load generator (profile.go).
	costs []cost
}

// globalArgs are the flags before any command of a binary the harness
// starts: the log level, and the profile section's --cpu-profile.
func (h *harness) globalArgs(name string) []string {
	args := append([]string{}, logArgs...)
	if h.cpuProfile != nil {
		args = append(args, h.cpuProfile(name)...)
	}
	return args
}

func (h *harness) bin(name string) string { return filepath.Join(h.binDir, name) }

// section is one part of the run; a failed section is reported and the
// others still run. An optional section runs only when -only names it.
type section struct {
	name     string
	run      func(h *harness, ctx context.Context) error
	optional bool
}

// binaries are the five that make build puts in bin/; mail-plane up runs
// each as a child (the plane as mail-plane serve).
var binaries = []string{"mail-plane", "mail-writer", "mail-inbox", "mail-gateway", "mail-console"}

var sections = []section{
	{"ingest", (*harness).ingestAll, false},
	{"reads", (*harness).readsAll, false},
	{"startup", (*harness).startupAndMemory, false},
	{"density", (*harness).density, false},
	{"extract", (*harness).extract, false},
	{"agent", (*harness).agent, false},
	{"imap", (*harness).imap, false},
	{"postgres", (*harness).postgres, false},
	{"fair", (*harness).fair, false},
	{"preauth", (*harness).preauth, false},
	{"netns", (*harness).netnsOpen, false},
	{"faults", (*harness).faults, false},
	{"console", (*harness).consolePage, false},
	{"webhooks", (*harness).webhooks, false},
	{"profile", (*harness).profile, true}, // make profile
}

func main() {
	os.Exit(run())
}

func run() int {
	out := flag.String("out", "results", "directory for bench.md, bench.png and bench.json")
	binDir := flag.String("bin", envOr("MAILPLANE_BIN", "bin"), "directory of the mailplane binaries (make build)")
	mp := flag.String("mailpit", envOr("MAILPLANE_MAILPIT", filepath.Join(".cache", "bin", "mailpit")), "Mailpit executable (make deps)")
	ref := flag.String("reference", envOr("MAILPLANE_REFERENCE", ""), "the reference sidecar's local_mailbox.py, density's baseline (none: that baseline is left out)")
	cell := flag.Duration("cell", time.Second, "measured time per side of each throughput figure")
	only := flag.String("only", "", "comma-separated sections to run (default: all but profile): ingest, reads, startup, density, extract, agent, imap, postgres, fair, preauth, netns, faults, console, webhooks, profile (make profile)")
	null := flag.String("null", "", "internal: serve a null baseline server (http or smtp) on fd 3")
	flood := flag.String("flood", "", "internal: hold the fair section's flood on these listeners (http:ADDR or smtp:ADDR, comma-separated) until killed")
	strangers := flag.String("strangers", "", "internal: hold the preauth section's strangers on this writer address until killed")
	flag.Parse()
	if *strangers != "" {
		holdStrangers(*strangers)
		return 0
	}
	if *flood != "" {
		holdFlood(*flood)
		return 0
	}
	if *null != "" {
		if err := serveNull(*null); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		return 0
	}
	if flag.NArg() > 0 || *cell <= 0 {
		flag.Usage()
		return 2
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	h := &harness{binDir: abs(*binDir), cell: *cell, out: *out, logf: func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "bench: "+f+"\n", a...)
	}}
	if _, err := os.Stat(*mp); err == nil {
		h.mailpitPath = abs(*mp)
	}
	if _, err := os.Stat(*ref); err == nil {
		h.referencePath = abs(*ref)
	}
	for _, name := range binaries {
		if _, err := os.Stat(h.bin(name)); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s not found in %s (make build)\n", name, h.binDir)
			return 2
		}
	}
	// Sockets need short paths (108 bytes), so the run's directory is a
	// short temporary one, removed at the end with every log in it.
	dir, err := os.MkdirTemp("", "mpb")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	h.procs = &procs{dir: dir}
	defer h.procs.stopAll()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	h.report = newReport(*cell, h.mailpitPath)
	if h.report.Machine.Fsync, err = measureFsync(dir); err != nil {
		fmt.Fprintln(os.Stderr, "bench: measuring the disk's fsync:", err)
		return 1
	}
	if h.report.previous, err = readReport(filepath.Join(*out, "bench.json")); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if *only != "" {
		h.report.Command = fmt.Sprintf("go run ./bench -only %s -out %s -cell %v", *only, *out, *cell)
	}
	failed := false
	for _, s := range sections {
		if named := contains(strings.Split(*only, ","), s.name); (*only != "" || s.optional) && !named {
			continue
		}
		h.logf("%s …", s.name)
		t := time.Now()
		err := s.run(h, ctx)
		h.procs.stopAll()
		if ctx.Err() != nil {
			h.logf("interrupted; every process it started is stopped")
			return 130
		}
		if err != nil {
			failed = true
			h.report.Failures = append(h.report.Failures, fmt.Sprintf("%s: %v", s.name, err))
			h.logf("%s FAILED: %v", s.name, err)
		} else {
			h.logf("%s done in %.1fs", s.name, time.Since(t).Seconds())
		}
	}
	h.report.finish()
	if err := h.report.write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	h.logf("wrote %s (bench.md, bench.json, and bench.png when a figure has a baseline)", *out)
	if failed {
		return 1
	}
	return 0
}

// readReport reads the bench.json a run wrote (nil, nil if there is
// none).
func readReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}
