package writer

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/mailmsg"
)

// The POST /emails body decoder (parseEmail, and decodeJSON in it) and
// the message composed from what it accepts (compose, which derives text
// from HTML) run in linear time on any body a candidate sends: deep
// nesting, long strings full of escapes, many keys, many recipients, many
// headers.
// capped are the cases a run repeats this many times, so that the base is
// measurable (complexity.MinBase): deep nesting's parse stops at a bound
// and takes microseconds whatever n is; many headers' sizes stay below
// where the map's own growth, not the parser, decides the time.
var capped = map[string]int{"deep nesting": 192, "many headers": 4}

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
		{"long text", withText("code 123456\\r\\n"), 80_000},
		{"escapes in text", withText(`\u00e9\"\\\/\t`), 80_000},
		{"surrogate pairs in text", withText(`\ud83d\ude00`), 160_000},
		{"lone surrogates in text", func(n int) []byte {
			return []byte(envelope + `"text":"` + strings.Repeat(`\u00e9`, n) + `\udc00"}`)
		}, 640_000},
		{"long html", func(n int) []byte {
			return []byte(envelope + `"html":"` + strings.Repeat(`<p>Open <a href='https://x.example/v'>this</a></p>`, n) + `"}`)
		}, 16_000},
		{"deep nesting", func(n int) []byte {
			return []byte(envelope + `"text":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
		}, 1000},
		{"many keys", func(n int) []byte {
			var b strings.Builder
			b.WriteString(envelope + `"text":"t"`)
			for i := range n {
				fmt.Fprintf(&b, `,"k%d":%d`, i, i)
			}
			b.WriteString("}")
			return []byte(b.String())
		}, 64_000},
		{"many recipients", func(n int) []byte {
			to := strings.TrimSuffix(strings.Repeat(`"Name <user@example.com>",`, n), ",")
			return []byte(`{"from":"site@example.com","to":[` + to + `],"subject":"s","text":"t"}`)
		}, 16_000},
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
		}, 24_000},
		{"long subject", func(n int) []byte {
			return []byte(`{"from":"site@example.com","to":"u@example.com","subject":"` + strings.Repeat("=?utf-8?q?x?= é", n) + `","text":"t"}`)
		}, 80_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "parseEmail/"+c.name, func(n int) func() {
				body := c.body(n)
				return func() {
					for range max(capped[c.name], 1) {
						if e, err := parseEmail(body, 16); err == nil {
							compose(e, now)
						}
					}
				}
			}, c.base)
		})
	}
}

// TestBatchAndAttachmentsLinear: the writer's new parsers of untrusted bytes (batch
// bodies, attachment content) and the composition and read-back of the
// message they make scale linearly with their input.
func TestBatchAndAttachmentsLinear(t *testing.T) {
	one := func(text string) map[string]any {
		return map[string]any{"from": "s@example.com", "to": "u@example.com", "subject": "s", "text": text}
	}
	t.Run("batch emails", func(t *testing.T) {
		linear(t, "batch of k emails", 768, func(k int) any {
			list := make([]any, k)
			for i := range list {
				list[i] = one(strings.Repeat("text ", 200))
			}
			b, _ := json.Marshal(list)
			return b
		}, func(in any) {
			items, fail := splitBatch(in.([]byte))
			if fail == nil {
				parseBatchEmails(items, true, 16)
			}
		})
	})
	t.Run("batch body size", func(t *testing.T) {
		linear(t, "batch of one email of n bytes", 512<<10, func(n int) any {
			b, _ := json.Marshal([]any{one(strings.Repeat("é\u00a0\\\"", n/8))})
			return b
		}, func(in any) {
			items, fail := splitBatch(in.([]byte))
			if fail == nil {
				parseBatchEmails(items, false, 16)
			}
		})
	})
	t.Run("attachment", func(t *testing.T) {
		linear(t, "attachment of n bytes", 512<<10, func(n int) any {
			content := make([]byte, n)
			for i := range content {
				content[i] = byte(i * 31)
			}
			enc := base64.StdEncoding.EncodeToString(content)
			var wrapped strings.Builder
			for len(enc) > 76 {
				wrapped.WriteString(enc[:76] + "\r\n")
				enc = enc[76:]
			}
			wrapped.WriteString(enc)
			return []any{map[string]any{"filename": "a.bin", "content": wrapped.String()}}
		}, func(in any) {
			list, fail := parseAttachments(in)
			if fail != nil {
				panic(fail.Message)
			}
			text := "t"
			mailmsg.Parse(compose(&email{From: "s@example.com", To: []string{"u@example.com"}, Text: &text, Attachments: list}, time.Unix(0, 0)))
		})
	})
	// A list of n values holds 24n bytes as Go values: at 4 Mi values and
	// up, the run's fresh memory, not the parser, decided its time (×20
	// for one doubling, 15 s for the test). 512 Ki values, parsed 8 times,
	// take the same CPU in a quarter of the memory.
	t.Run("byte-list attachment", func(t *testing.T) {
		linear(t, "attachment of n byte values (×8)", 512<<10, func(n int) any {
			list := make([]any, n)
			for i := range list {
				list[i] = float64(i % 256)
			}
			return []any{map[string]any{"filename": "a.bin", "content": list}}
		}, func(in any) {
			for range 8 {
				if _, fail := parseAttachments(in); fail != nil {
					panic(fail.Message)
				}
			}
		})
	})
}

// linear runs complexity.Linear on op over inputs prepare builds.
func linear(t *testing.T, name string, base int, prepare func(size int) any, op func(input any)) {
	complexity.Linear(t, name, func(n int) func() {
		in := prepare(n)
		return func() { op(in) }
	}, base)
}
