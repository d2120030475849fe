package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/otp"
)

// extract measures code and link extraction (otp.Extract) in this process:
// mail-gateway runs it on every message it answers, at read time, so it
// adds to reads and never to ingest. The message is a 100 KiB HTML mail
// (a long newsletter-style layout with a code, a button, many links and a
// full footer) with its text part, as in BenchmarkExtract100KiBHTML.
func (h *harness) extract(ctx context.Context) error {
	html, text := extractSample(100 << 10)
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
	h.report.Notes = append(h.report.Notes, fmt.Sprintf("Extraction (otp.Extract, in mail-gateway at read time, not on ingest): "+
		"a %d KiB HTML message (with its %d KiB text part) takes %.2f ms (median; p99 %.2f ms; %d runs in one process).",
		len(html)>>10, len(text)>>10, ms(runs[len(runs)/2]), ms(runs[len(runs)*99/100]), len(runs)))
	return nil
}

// extractSample builds an HTML mail of about size bytes, and its text part.
func extractSample(size int) (string, string) {
	var h, t strings.Builder
	h.WriteString(`<!DOCTYPE html><html><head><style>td{font-family:Arial}</style></head><body><table width="600">`)
	h.WriteString(`<tr><td><p>Use this code to verify your email:</p><p style="font-size:32px;letter-spacing:6px"><b>884 213</b></p></td></tr>`)
	h.WriteString(`<tr><td bgcolor="#2f6fed"><a href="https://acme.example/verify?t=abc" style="padding:12px">Verify email address</a></td></tr>`)
	t.WriteString("Use this code to verify your email: 884 213\r\nVerify email address (https://acme.example/verify?t=abc)\r\n")
	for i := 0; h.Len() < size-2048; i++ {
		fmt.Fprintf(&h, `<tr><td style="padding:8px;font-size:14px"><h3>Story %d: what changed in 2026</h3><p>Order %d shipped on 2026-11-%02d at 10:%02d; `+
			`call +1 (555) 010-%04d or read <a href="https://news.acme.example/story/%d?utm_source=mail&amp;utm_medium=email">the full story</a>. `+
			`Over 12,000 teams &amp; 250 partners joined &mdash; prices from $%d.99.</p></td></tr>`, i, 10000000+i, i%28+1, i%60, i%10000, i, i%90+10)
		fmt.Fprintf(&t, "Story %d: Order %d shipped on 2026-11-%02d; read https://news.acme.example/story/%d\r\n", i, 10000000+i, i%28+1, i)
	}
	h.WriteString(`<tr><td><p>Acme Inc., 1 Example Way, Springfield 55555 · +1 (555) 010-4477</p>`)
	h.WriteString(`<p><a href="https://twitter.com/acme">Twitter</a> <a href="https://acme.example/unsubscribe">Unsubscribe</a></p><p>© 2026 Acme</p></td></tr></table></body></html>`)
	return h.String(), t.String()
}
