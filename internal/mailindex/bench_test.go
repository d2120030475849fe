package mailindex

import (
	"context"
	"encoding/base64"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/otp"
	"github.com/websitebench/mailplane/internal/render"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// benchMessage is the message make bench sends (bench/clients.go): a
// sign-up mail whose text is n bytes of 72-byte lines ending in "\n", as
// the writer composes it (its LF-only text goes as base64) and the plane
// scrubs it before Of.
func benchMessage(tb testing.TB, n int) []byte {
	const line = "Your code is 123456. Open https://site.example/verify?t=abc to sign in.\n"
	text := strings.Repeat(line, n/len(line)+1)[:n]
	text = text[:n-1] + "\n"
	var b strings.Builder
	b.WriteString("From: sender@example.com\r\nTo: agent@example.com\r\nSubject: Your sign-up code\r\n" +
		"Date: Sun, 06 Dec 2026 07:00:00 +0000\r\nMessage-ID: <6f1c2a9e-0d4b-4f7e-9a51-3c2d1b0e8f77@websitebench.local>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString([]byte(text))
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	raw, err := mailmsg.Scrub(context.Background(), []byte(b.String()), "sender@example.com", []string{"agent@example.com"})
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// BenchmarkOf is what the plane spends indexing the bench's 512 B
// message at accept, and its steps; and the bench's 100 KiB message.
func BenchmarkOf(b *testing.B) {
	raw := benchMessage(b, 512)
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			Of(raw).Encode()
		}
	})
	b.Run("of", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			Of(raw)
		}
	})
	large := benchMessage(b, 100<<10)
	b.Run("all-100KiB", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			Of(large).Encode()
		}
	})
	p := mailmsg.Parse(raw)
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			mailmsg.Parse(raw)
		}
	})
	b.Run("extract", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			otp.Extract(p.Subject, p.Text, p.HTML)
		}
	})
	b.Run("linkurls", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			render.LinkURLs(rpc.Message{Text: p.Text, HTML: p.HTML})
		}
	})
	x := Of(raw)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			x.Encode()
		}
	})
}

// cpuPerOp reports the process's CPU time (user and system, the garbage
// collector's included) per operation, which a machine busy with other
// work does not inflate as it does ns/op. Call the function it returns
// after the loop.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
