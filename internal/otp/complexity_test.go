package otp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

// Extract runs in linear time on any body: every check reads a bounded
// window around one run of digits, and these shapes would show one that
// does not (a window that grows with the text, a search that starts over
// from every candidate).
func TestExtractLinear(t *testing.T) {
	distinct := func(prefix string) func(int) string {
		return func(n int) string {
			var b strings.Builder
			for i := range n {
				fmt.Fprintf(&b, prefix, 100000+i)
			}
			return b.String()
		}
	}
	for _, c := range []struct {
		name       string
		text, html func(int) string
		base       int
	}{
		{"one long digit run", repeat("7"), nil, 3_200_000},
		{"digit runs of every length", repeat("1 12 123 1234 12345 123456 1234567 12345678 123456789 "), nil, 12_800},
		{"codes after code words", repeat("Your code is 123456. "), nil, 16_000},
		{"distinct codes", distinct("code %d "), nil, 2_000},
		{"code words without codes", repeat("code otp pin verification passcode "), nil, 20_000},
		{"code words then one code", func(n int) string { return strings.Repeat("code ", n) + "123456" }, nil, 160_000},
		{"joined numbers", repeat("1,234.56 10.0.0.1 2024-01-02 555-0100 "), nil, 16_000},
		{"phone words", repeat("call us at 5550100 or "), nil, 8000},
		{"written dates", repeat("January 2, 2024 © 2024 "), nil, 3200},
		{"digits between letters", repeat("a1234b"), nil, 307_200},
		{"links in text", repeat("see https://x.example/a "), nil, 2_000},
		// Below about 40 KB of hrefs, Go's regexp (links.go's href) clears
		// a bitmap the size of the text for every match, and the time
		// grows faster than the text; the sizes here start above that.
		{"hrefs", nil, repeat(`<a href="https://x.example/a?b=1&amp;c=2">x</a>`), 2_000},
		{"unclosed hrefs", nil, repeat(`<a href="`), 32_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Extract/"+c.name, func(n int) func() {
				var text, html string
				if c.text != nil {
					text = c.text(n)
				}
				if c.html != nil {
					html = c.html(n)
				}
				return func() { Extract("", text, html) }
			}, c.base)
		})
	}
}

func repeat(unit string) func(int) string {
	return func(n int) string { return strings.Repeat(unit, n) }
}
