package render

import (
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The frame's sanitizer reads a sender's HTML in linear time, whatever
// its shape: dropped elements nested deep and never closed, tags and
// attributes by the thousand, a style full of what it blocks, a comment
// or attribute that never ends, and links the text shares.
func TestSanitizeLinear(t *testing.T) {
	complexity.SkipUnderRace(t)
	for _, c := range []struct {
		name string
		html func(n int) string
		base int
		reps int // a run repeats the sanitizer (times): the tokenizer skips these shapes in microseconds
	}{
		{"nested dropped elements", repeat("<svg>"), 100_000, 1},
		{"nested kept elements", repeat(`<div style="color:red">`), 10_000, 1},
		{"many attributes", func(n int) string { return "<a " + strings.Repeat(`title=x `, n) + `href="https://a.example/">x</a>` }, 100_000, 1},
		{"blocked css", func(n int) string { return "<style>" + strings.Repeat("url(@import ", n) + "</style>" }, 20_000, 1},
		{"css near misses", func(n int) string { return `<p style="` + strings.Repeat("ur image-se @impor", n) + `">` }, 10_000, 1},
		{"unclosed comment", func(n int) string { return "<!--" + strings.Repeat("a-", n) }, 250_000, 4},
		{"unclosed attribute", func(n int) string { return `<a href="` + strings.Repeat("x", n) }, 250_000, 16},
		{"entities", repeat("&amp;&#x27;&lt;"), 20_000, 1},
		{"images", repeat(`<img src="cid:logo">`), 5_000, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Sanitize/"+c.name, func(n int) func() {
				h := c.html(n)
				inline := []rpc.InlineImage{{ContentID: "logo", ContentType: "image/png", Data: []byte("x")}}
				return complexity.Repeat(c.reps, func() { sanitized(h, inline) })
			}, c.base)
		})
	}
	// The plane reads a click's link with LinkURLs: links of the HTML
	// only, each with many attributes before its href.
	complexity.Linear(t, "LinkURLs/html links", func(n int) func() {
		m := rpc.Message{HTML: strings.Repeat(`<a title=a class=b id=c href="https://site.example/`+"x"+`">go</a>`, n)}
		return func() { LinkURLs(m) }
	}, 10_000)
	// Links shared with the text: each HTML link finds its ping at once.
	complexity.Linear(t, "FrameDocument/shared links", func(n int) func() {
		var text, html strings.Builder
		for i := range n {
			u := "https://site.example/" + strings.Repeat("p", i%64) + "?n=" + strings.Repeat("1", i%7)
			text.WriteString(u + "\n")
			html.WriteString(`<a href="` + u + `">go</a>`)
		}
		m := rpc.Message{ID: 1, Text: text.String(), HTML: html.String()}
		return func() { FrameDocument(m, func(i int) string { return PingPath("/inbox/t", 1, i) }) }
	}, 2_000)
}

func repeat(unit string) func(int) string {
	return func(n int) string { return strings.Repeat(unit, n) }
}
