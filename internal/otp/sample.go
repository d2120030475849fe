package otp

import (
	"fmt"
	"strings"
)

// SampleHTML builds a realistic HTML sign-up mail of about size bytes
// (a code, a button, a newsletter's worth of stories with order numbers,
// dates, phones and prices, a postal footer) and its text part: the input
// of Extract's benchmarks (its own, and make bench's).
func SampleHTML(size int) (string, string) {
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
