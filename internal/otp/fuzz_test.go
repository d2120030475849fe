package otp

import (
	"strings"
	"testing"
)

// FuzzExtract checks what holds for any body: every code is a run of 4 to 8
// ASCII digits that stands in the text with no ASCII digit beside it, no
// code repeats, and every link is an http(s) URL.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		"code 123456", "2024-01-02 code 778899", "phone 555-0100 code 4321", "١٢٣٤ arabic",
		"see https://a.example/x.", "(https://b.example/y)", "https://ü.example/p",
		"Call +1 555 010 0100", "January 2, 2024", "xhttps://e.example", "https://",
	} {
		f.Add(s, `<a href="https://h.example/1?a=1&amp;b=2">x</a>`)
	}
	f.Fuzz(func(t *testing.T, text, html string) {
		r := Extract(text, html)
		if len(r.Codes) > MaxCodes || len(r.Links) > MaxLinks {
			t.Fatalf("limits exceeded: %d codes, %d links", len(r.Codes), len(r.Links))
		}
		seen := map[string]bool{}
		for _, c := range r.Codes {
			if len(c) < 4 || len(c) > 8 || strings.Trim(c, "0123456789") != "" {
				t.Fatalf("code %q is not 4-8 ASCII digits", c)
			}
			if seen[c] {
				t.Fatalf("code %q repeated", c)
			}
			seen[c] = true
			if !standsAlone(text, c) {
				t.Fatalf("code %q does not stand alone in %q", c, text)
			}
		}
		for _, l := range r.Links {
			low := strings.ToLower(l)
			if !strings.HasPrefix(low, "http://") && !strings.HasPrefix(low, "https://") {
				t.Fatalf("link %q is not http(s)", l)
			}
		}
	})
}

func standsAlone(text, code string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], code)
		if j < 0 {
			return false
		}
		s, e := i+j, i+j+len(code)
		if (s == 0 || !isDigit(text[s-1])) && (e == len(text) || !isDigit(text[e])) {
			return true
		}
		i = s + 1
	}
}
