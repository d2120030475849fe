package otp

import (
	"strings"
	"testing"
)

// BenchmarkExtract is one ordinary sign-in message.
func BenchmarkExtract(b *testing.B) {
	text := "Hello,\r\n\r\nYour verification code is 410005.\r\nOr open https://site.example/verify?t=5 to sign in.\r\n"
	for b.Loop() {
		Extract("Sign in", text, "")
	}
}

// BenchmarkExtractMegabyte is a 1 MiB body of numbers and words, the
// worst a message can bring: the cost stays linear in its length.
func BenchmarkExtractMegabyte(b *testing.B) {
	text := strings.Repeat("call 555-0100 on 2024-01-02, code 123456 https://x.example/a?b=1 ", 1<<20/64)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Extract("", text, "")
	}
}

// BenchmarkExtract100KiBHTML is the time per message for a 100 KiB HTML
// mail (a long newsletter-style layout with a code, a button, many links
// and a full footer) with its derived text part: what the gateway spends
// on one such message when it answers a read.
func BenchmarkExtract100KiBHTML(b *testing.B) {
	html, text := SampleHTML(100 << 10)
	b.SetBytes(int64(len(html) + len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Extract("Your Acme verification code", text, html)
	}
}
