package otp

import (
	"strings"
	"testing"
)

// BenchmarkExtract is one ordinary sign-in message.
func BenchmarkExtract(b *testing.B) {
	text := "Hello,\r\n\r\nYour verification code is 410005.\r\nOr open https://site.example/verify?t=5 to sign in.\r\n"
	for b.Loop() {
		Extract(text, "")
	}
}

// BenchmarkExtractMegabyte is a 1 MiB body of numbers and words, the
// worst a message can bring: the cost stays linear in its length.
func BenchmarkExtractMegabyte(b *testing.B) {
	text := strings.Repeat("call 555-0100 on 2024-01-02, code 123456 https://x.example/a?b=1 ", 1<<20/64)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Extract(text, "")
	}
}
