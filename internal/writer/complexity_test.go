package writer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/complexity"
)

// The POST /emails body decoder (parseEmail) and the message composed from
// what it accepts (compose, which derives text from HTML) run in linear
// time on any body a candidate sends: deep nesting, long strings full of
// escapes, many keys, many recipients, many headers.
func TestParseEmailLinear(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	envelope := `{"from":"site@example.com","to":"u@example.com","subject":"s",`
	withText := func(unit string) func(int) []byte {
		return func(n int) []byte { return []byte(envelope + `"text":"` + strings.Repeat(unit, n) + `"}`) }
	}
	for _, c := range []struct {
		name string
		body func(int) []byte
		base int
	}{
		{"long text", withText("code 123456\\r\\n"), 2_500},
		{"escapes in text", withText(`\u00e9\"\\\/\t`), 2_500},
		{"surrogate pairs in text", withText(`\ud83d\ude00`), 2_500},
		{"lone surrogates in text", func(n int) []byte {
			return []byte(envelope + `"text":"` + strings.Repeat(`\u00e9`, n) + `\udc00"}`)
		}, 5_000},
		{"long html", func(n int) []byte {
			return []byte(envelope + `"html":"` + strings.Repeat(`<p>Open <a href='https://x.example/v'>this</a></p>`, n) + `"}`)
		}, 500},
		{"deep nesting", func(n int) []byte {
			return []byte(envelope + `"text":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
		}, 1_000},
		{"many keys", func(n int) []byte {
			var b strings.Builder
			b.WriteString(envelope + `"text":"t"`)
			for i := range n {
				fmt.Fprintf(&b, `,"k%d":%d`, i, i)
			}
			b.WriteString("}")
			return []byte(b.String())
		}, 2_000},
		{"many recipients", func(n int) []byte {
			to := strings.TrimSuffix(strings.Repeat(`"Name <user@example.com>",`, n), ",")
			return []byte(`{"from":"site@example.com","to":[` + to + `],"subject":"s","text":"t"}`)
		}, 500},
		{"many headers", func(n int) []byte {
			var b strings.Builder
			b.WriteString(envelope + `"text":"t","headers":{`)
			for i := range n {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"X-H%d":"v"`, i)
			}
			b.WriteString("}}")
			return []byte(b.String())
		}, 2_000},
		{"long subject", func(n int) []byte {
			return []byte(`{"from":"site@example.com","to":"u@example.com","subject":"` + strings.Repeat("=?utf-8?q?x?= é", n) + `","text":"t"}`)
		}, 2_500},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "parseEmail/"+c.name, func(n int) func() {
				body := c.body(n)
				return func() {
					if e, err := parseEmail(body, 16); err == nil {
						compose(e, now)
					}
				}
			}, c.base)
		})
	}
}
