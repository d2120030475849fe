package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/websitebench/mailplane/internal/otp"
)

// extract measures code and link extraction (otp.Extract) in this process:
// the plane runs it once per message, when it accepts it (mailindex.Of),
// so it adds to ingest and never to reads. The message is a 100 KiB HTML mail
// (a long newsletter-style layout with a code, a button, many links and a
// full footer) with its text part, as in BenchmarkExtract100KiBHTML.
func (h *harness) extract(ctx context.Context) error {
	html, text := otp.SampleHTML(100 << 10)
	if r := otp.Extract("Your Acme verification code", text, html); r.OTP != "884213" || r.ActionLink == "" {
		return fmt.Errorf("the sample yields otp %q, action link %q", r.OTP, r.ActionLink)
	}
	var runs []time.Duration
	for end := time.Now().Add(h.cell); time.Now().Before(end) && ctx.Err() == nil; {
		start := time.Now()
		otp.Extract("Your Acme verification code", text, html)
		runs = append(runs, time.Since(start))
	}
	slices.Sort(runs)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	h.report.Notes = append(h.report.Notes, fmt.Sprintf("Extraction (otp.Extract, in the plane once per message at accept, never at read time): "+
		"a %d KiB HTML message (with its %d KiB text part) takes %.2f ms (median; p99 %.2f ms; %d runs in one process).",
		len(html)>>10, len(text)>>10, ms(runs[len(runs)/2]), ms(runs[len(runs)*99/100]), len(runs)))
	return nil
}
