package mailmsg

import (
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

func TestHeaders(t *testing.T) {
	raw := []byte("Subject: =?utf-8?q?caf=C3=A9?=\r\nX-Long: a\r\n b\r\nnot a field\r\nFrom: a@example.com\r\n\r\nSubject: body\r\n")
	got := Headers(raw)
	want := []Field{{"Subject", "café"}, {"X-Long", "a b"}, {"From", "a@example.com"}}
	if len(got) != len(want) {
		t.Fatalf("Headers = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("field %d = %q, want %q", i, got[i], want[i])
		}
	}
	if len(Headers([]byte("no header at all"))) != 0 {
		t.Fatal("a body without a header has fields")
	}
}

// Headers reads at most the header caps (limits.HeaderBytes and
// HeaderLines): each input is repeated to a measurable base.
func TestHeadersLinear(t *testing.T) {
	for _, c := range []struct {
		name  string
		input func(int) []byte
		base  int
	}{
		{"folded header", folded, 10_000},
		{"many headers", manyHeaders, 10_000},
		{"encoded words", func(n int) []byte {
			return []byte("Subject: " + strings.Repeat("=?a?q?=Z", n) + "?=\r\n\r\nbody")
		}, 4_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Headers/"+c.name, func(n int) func() {
				raw := c.input(n)
				return complexity.Repeat(capped, func() { Headers(raw) })
			}, c.base)
		})
	}
}

// FuzzHeaders: any bytes give fields with a name and no line break in a
// value, and never a panic.
func FuzzHeaders(f *testing.F) {
	f.Add([]byte("Subject: s\r\nX: a\r\n b\r\n\r\nbody"))
	f.Add([]byte("no header"))
	f.Add([]byte(":\r\n \r\n\r\n"))
	f.Add([]byte("0:0\r0")) // a bare CR in a value (found by fuzzing)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, fl := range Headers(raw) {
			if fl.Name == "" || strings.ContainsAny(fl.Value, "\r\n") && !strings.ContainsAny(string(raw), "=") {
				t.Fatalf("field %q from %q", fl, raw)
			}
		}
	})
}
