package otp

import (
	"slices"
	"strings"
	"testing"
)

// FuzzExtract checks what holds for any message: Extract does not panic;
// every code is 4 to 10 ASCII letters and digits and stands in the
// subject, the text part or the HTML part's visible text once separators
// (white space and hyphens) are removed; no code repeats; the otp is the
// first code; the links and the action link are http(s) URLs, and the
// action link is one of the message's links.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		"code 123456", "2024-01-02 code 778899", "phone 555-0100 code 4321", "١٢٣٤ arabic", "Code: 884 213",
		"G-583920 is your code", "Your code: XQM-4R7", "4 8 3 9 2 0", "您的验证码是483920", "Springfield 55555",
		"see https://a.example/x.", "(https://b.example/y)", "Verify: https://ü.example/p", "Call +1 555 010 0100",
	} {
		f.Add("Your code", s, `<a href="https://h.example/1?a=1&amp;b=2" style="padding:4px">Verify</a>`)
		f.Add("", s, `<table><tr><td>4</td><td>8</td><td>3</td><td>9</td></tr></table><b>ABC-123</b><!--`)
	}
	f.Fuzz(func(t *testing.T, subject, text, html string) {
		r := Extract(subject, text, html)
		if len(r.Codes) > MaxCodes || len(r.Links) > MaxLinks {
			t.Fatalf("limits exceeded: %d codes, %d links", len(r.Codes), len(r.Links))
		}
		if r.OTP != "" && r.OTP != r.Codes[0] {
			t.Fatalf("otp %q is not the first of %q", r.OTP, r.Codes)
		}
		visible := htmlDoc(html).text
		seen := map[string]bool{}
		for _, c := range r.Codes {
			if len(c) < 4 || len(c) > 10 || strings.Trim(c, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
				t.Fatalf("code %q is not 4-10 ASCII capitals and digits", c)
			}
			if seen[c] {
				t.Fatalf("code %q repeated", c)
			}
			seen[c] = true
			if !strings.Contains(unseparated(subject), c) && !strings.Contains(unseparated(text), c) && !strings.Contains(unseparated(visible), c) {
				t.Fatalf("code %q is in none of %q, %q, %q", c, subject, text, visible)
			}
		}
		for _, l := range r.Links {
			low := strings.ToLower(l)
			if !strings.HasPrefix(low, "http://") && !strings.HasPrefix(low, "https://") {
				t.Fatalf("link %q is not http(s)", l)
			}
		}
		if r.ActionLink != "" && len(r.Links) < MaxLinks && !slices.Contains(r.Links, r.ActionLink) {
			t.Fatalf("action link %q is not one of the links %q", r.ActionLink, r.Links)
		}
	})
}

// unseparated is s without the separators a code may be written with.
func unseparated(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '-' || r == '\u00a0' {
			return -1
		}
		return r
	}, s)
}
