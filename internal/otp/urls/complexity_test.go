package urls

import (
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

// Spans runs in linear time on any text. The shapes are the ones that made
// the old scan quadratic (a scheme rejected inside a long run of URL
// characters, from which the rest of the run was read again) and their
// neighbours. Texts longer than limits.LinkifyBytes are searched only up
// to it, so their times stop growing; that passes too.
func TestSpansLinear(t *testing.T) {
	for _, c := range []struct {
		name string
		text func(n int) string
		base int
		reps int // a run repeats Spans (times): these take microseconds below the text's cap
	}{
		{"schemes after letters", repeat("xhttp://"), 2000, 256},
		{"schemes with bad hosts", repeat("1http://%zz"), 2000, 64},
		{"schemes with bad paths", repeat("/http://a/%z"), 2000, 32},
		// Runs as long as a URL may be, each full of candidates that
		// url.Parse reads to the run's end and refuses.
		{"runs of bad candidates", repeat(strings.Repeat("/http://a/%z", 600) + " "), 2, 256},
		{"long run of URL characters", repeat("a"), 20_000, 256},
		{"one URL with closing brackets", func(n int) string { return "http://a/" + strings.Repeat(")", n) }, 4000, 256},
		{"unbalanced brackets", repeat("http://a/" + strings.Repeat(".", 64) + " "), 300, 32},
		{"trailing punctuation", repeat("http://a/" + strings.Repeat(".", 64) + " "), 300, 32},
		{"many short URLs", repeat("https://x.example/a "), 32_000, 4},
		{"schemes alone", repeat("http:// "), 5000, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Spans/"+c.name, func(n int) func() {
				text := c.text(n)
				return func() {
					for range max(c.reps, 1) {
						Spans(text)
					}
				}
			}, c.base)
		})
	}
}

func repeat(unit string) func(int) string {
	return func(n int) string { return strings.Repeat(unit, n) }
}
